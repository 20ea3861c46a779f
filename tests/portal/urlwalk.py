"""Walk the URL configuration: every pattern, for the permission tests that must cover each one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern


@dataclass(frozen=True)
class Route:
    key: str  # "<namespace>:<name>", or the route itself for a pattern without a name
    namespace: str
    name: str | None
    route: str  # the whole route: the patterns of every level, joined
    arguments: tuple[str, ...]  # its argument names ("format" of DRF's suffix patterns left out)
    view_module: str


def all_routes() -> list[Route]:
    """Every URL pattern of the configuration, DRF's format-suffix twins folded into their base pattern."""
    found: dict[str, Route] = {}

    def walk(resolver: URLResolver, route: str, namespaces: tuple[str, ...], names: set[str]) -> None:
        for entry in resolver.url_patterns:
            here = route + _route_text(entry.pattern)
            arguments = names | set(entry.pattern.regex.groupindex) | set(getattr(entry.pattern, "converters", {}))
            if isinstance(entry, URLResolver):
                walk(entry, here, (*namespaces, entry.namespace) if entry.namespace else namespaces, arguments)
            elif isinstance(entry, URLPattern) and "format" not in arguments:
                view = getattr(entry.callback, "cls", entry.callback)
                namespace = ":".join(namespaces)
                label = entry.name or here
                key = f"{namespace}:{label}" if namespace else label
                found.setdefault(key, Route(key, namespace, entry.name, here, tuple(sorted(arguments)),
                                            view.__module__))

    walk(get_resolver(), "", (), set())
    return sorted(found.values(), key=lambda r: r.key)


def _route_text(pattern) -> str:
    if isinstance(pattern, RoutePattern):
        return str(pattern)
    return str(pattern).removeprefix("^").removesuffix("$")


_ARGUMENT = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def url_of(route: Route, values: dict[str, object]) -> str:
    """The route's URL with each argument replaced by ``values[argument]``."""
    return "/" + _ARGUMENT.sub(lambda m: str(values[m.group(1) or m.group(2)]), route.route)


def study_url_patterns(view_module_prefix: str = "") -> dict[str, list[str]]:
    """URL name -> its argument names, for every pattern taking ``study_code`` whose view's module
    starts with ``view_module_prefix`` (all of them by default): what each app's study matrix covers."""
    return {route.name: list(route.arguments) for route in all_routes()
            if "study_code" in route.arguments and route.view_module.startswith(view_module_prefix)}
