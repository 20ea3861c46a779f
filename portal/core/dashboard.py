"""What each role sees first for a study: counts and the next things to do.

Each app adds its rows through ``register(role, provider)``; a provider returns a list of
``Item`` for a study (and the viewing user). Runs inside the study scope. The page itself, and the site
administrators' list of every study, are ``portal.access.views.dashboard``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from portal.core.roles import Role


@dataclass
class Item:
    label: str
    count: int | None = None
    url: str | None = None
    empty_text: str = ""
    attention: bool = False


@dataclass
class Panel:
    role: str
    title: str
    items: list[Item] = field(default_factory=list)
    empty_text: str = "Nothing to do here yet."


_TITLES = {
    Role.COORDINATOR: "Coordination",
    Role.ETHICS_OFFICER: "Ethics review",
    Role.RESEARCHER: "Research data",
}
_PROVIDERS: dict[str, list[Callable]] = {role: [] for role in Role.values}


def register(role: str) -> Callable[[Callable], Callable]:
    """Decorator: add ``provider(study, user) -> list[Item]`` to the panel of ``role``."""

    def decorator(provider: Callable) -> Callable:
        _PROVIDERS[role].append(provider)
        return provider

    return decorator


def build(role: str, study, user) -> Panel:
    panel = Panel(role=role, title=_TITLES.get(role, role))
    for provider in _PROVIDERS.get(role, []):
        panel.items.extend(provider(study, user))
    return panel
