"""Which withdrawal made a superseding release, for the release's page. A request made since superseding releases
name their withdrawal in the manifest keeps its id (``ReleaseRequest.superseding``); for one made before, only the
withdrawal's own records know it (research's tombstones), and releases does not import research, which builds on
it: research registers that lookup here when it starts (``research/apps.py``), as apps register dashboard items."""

from __future__ import annotations

from collections.abc import Callable

from portal.releases.models import ReleaseRequest

_lookups: list[Callable[[ReleaseRequest], int | None]] = []


def register_lookup(lookup: Callable[[ReleaseRequest], int | None]) -> None:
    """``lookup(release)``: the id of the withdrawal that made a superseding release that does not name it."""
    if lookup not in _lookups:
        _lookups.append(lookup)


def made_by_withdrawal(release: ReleaseRequest) -> int | None:
    """The id of the withdrawal that made a superseding release; None for any other."""
    if not release.supersedes_id:
        return None
    if (release.superseding or {}).get("withdrawal"):
        return release.superseding["withdrawal"]
    return next((found for lookup in _lookups if (found := lookup(release)) is not None), None)
