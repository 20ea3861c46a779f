import functools
import re
from collections.abc import Iterable

from django import template
from django.conf import settings
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from exporter.jsonfile import json_bytes
from portal.core.roles import Role

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


def _episode_folder(index: int) -> str:
    return f"episode-{int(index):06d}"


@register.filter
def episodes_counted(indexes: Iterable[int]) -> str:
    """Episode indexes as a count and their folders: ``[4]`` -> ``1 episode (episode-000004)``. An index is not a
    count: "4 removed" of a two-episode release read as four episodes."""
    indexes = sorted(int(index) for index in indexes)
    if not indexes:
        return "no episode"
    noun = "episode" if len(indexes) == 1 else "episodes"
    return f"{len(indexes)} {noun} ({', '.join(_episode_folder(index) for index in indexes)})"


_REMOVED = re.compile(r"^(?P<head>.*?): (?P<indexes>\d+(?:, \d+)*) removed$")


@register.filter
def release_reason(reason: str) -> str:
    """A release's reason as people read it: the superseding release's ``consent withdrawn: 4 removed`` (episode
    indexes) becomes ``consent withdrawn: 1 episode (episode-000004) removed``; any other reason is unchanged."""
    match = _REMOVED.match(reason or "")
    if match is None:
        return reason
    indexes = [int(index) for index in match["indexes"].split(", ")]
    return f"{match['head']}: {episodes_counted(indexes)} removed"


# What ``json_script`` escapes: nothing in the JSON can end the element or open a comment in it.
_LD_JSON_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


@register.filter
def ld_json(value) -> str:
    """``value`` as a schema.org JSON-LD data block (``<script type="application/ld+json">``), escaped as Django's
    ``json_script`` escapes. A data block is never executed, so the Content-Security-Policy's ``script-src``
    does not concern it; nothing else in a template may be an inline script."""
    text = json_bytes(value).decode("utf-8").translate(_LD_JSON_ESCAPES)
    return format_html('<script type="application/ld+json">{}</script>', mark_safe(text))  # noqa: S308


@register.simple_tag
def page_url(name: str, *args) -> str:
    """``{% url name args %}`` for a page's fixed links (the layout's and a study's navigation: some 25 on every
    page), reversed once per process for each name and arguments (a study's code): reverse() costs about 0.1 ms
    of CPU a call. Escaped as ``{% url %}`` escapes its result. Not for namespaced names (their reverse depends
    on the request's current app) nor for arguments that differ on every row (the cache would only grow)."""
    return _reversed(get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF, name, args)


@functools.lru_cache(maxsize=4096)
def _reversed(prefix: str, urlconf: str, name: str, args: tuple) -> str:
    if ":" in name:
        raise ValueError(f"page_url is not for namespaced names ({name!r}): use {{% url %}}")
    return reverse(name, urlconf=urlconf, args=args)  # the prefix: reverse() reads it from the thread
