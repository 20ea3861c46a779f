"""Walk the URL configuration for the study URLs that permission tests must cover."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver


def study_url_patterns(view_module_prefix: str = "") -> dict[str, list[str]]:
    """URL name -> its argument names, for every pattern taking ``study_code`` whose view's module
    starts with ``view_module_prefix`` (all of them by default)."""
    found: dict[str, list[str]] = {}

    def walk(resolver: URLResolver, inherited: set[str]) -> None:
        for entry in resolver.url_patterns:
            names = inherited | set(entry.pattern.regex.groupindex)
            if isinstance(entry, URLResolver):
                walk(entry, names)
            elif isinstance(entry, URLPattern) and "study_code" in names:
                view = getattr(entry.callback, "cls", entry.callback)
                if view.__module__.startswith(view_module_prefix):
                    found[entry.name] = sorted(names - {"format"})

    walk(get_resolver(), set())
    return found
