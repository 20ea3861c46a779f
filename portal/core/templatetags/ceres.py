from collections.abc import Iterable

from django import template

from portal.access.models import Role

register = template.Library()


@register.filter
def role_label(role: str) -> str:
    """A role's display name, the one every page uses: ``ethics_officer`` -> ``Ethics officer``."""
    try:
        return Role(role).label
    except ValueError:
        return role


@register.filter
def role_labels(roles: Iterable[str]) -> list[str]:
    """The display names of ``roles``, in the order roles are always listed."""
    held = set(roles)
    return [label for value, label in Role.choices if value in held]
