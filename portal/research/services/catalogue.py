"""What a researcher can see of a study: its released episodes (one row per episode of each published
release), and whether an episode may still be given out (its release published, consent and withdrawal as they
stand now)."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.shortcuts import get_object_or_404

from exporter.release import MANIFEST, SIGNATURE
from portal.core.fixed_query import in_study, scoped_study_id
from portal.releases.models import EpisodeTag, Release, ReleaseItem, ReleaseRequest
from portal.releases.services import gate, redacted
from portal.research.exceptions import AccessRefused
from portal.studies.models import Demonstrator

RELEASED = ReleaseRequest.State.RELEASED
MAX_NAMED = 20  # published releases named in a "not published" answer
SUPERSEDED = ReleaseRequest.State.SUPERSEDED
# A release superseded after a withdrawal keeps serving its other episodes while the release that supersedes it
# is on its way (awaiting approval, approved, being released, or failed and waiting for a retry): researchers
# keep every unaffected episode throughout. Once that one is published, the old one's pages lead to it.
ON_ITS_WAY = (ReleaseRequest.State.AWAITING_APPROVAL, ReleaseRequest.State.APPROVED,
              ReleaseRequest.State.RELEASING, ReleaseRequest.State.FAILED)


def serving(release: ReleaseRequest) -> bool:
    """Whether episodes of ``release`` may be given out: it is published, or superseded with its successor on
    its way (only the episodes its successor holds, then)."""
    if release.state == RELEASED:
        return True
    return release.state == SUPERSEDED and ReleaseRequest.objects.filter(
        supersedes=release, state__in=ON_ITS_WAY).exists()


def _kept() -> Exists:
    """An item of a superseded release whose episode the release superseding it holds."""
    return Exists(ReleaseItem.objects.filter(request__supersedes=OuterRef("request"),
                                             episode_index=OuterRef("episode_index")))


def released_requests() -> QuerySet[ReleaseRequest]:
    """The published releases of the study in scope, and those superseded whose successor is on its way."""
    return ReleaseRequest.objects.filter(Q(state=RELEASED) | Q(state=SUPERSEDED, superseded_by__state__in=ON_ITS_WAY))


def released_request(number: int) -> ReleaseRequest:
    return get_object_or_404(released_requests().select_related("study", "release"), number=number)


def not_published(study_code: str, number: object) -> str:
    """Why there is no published release ``number`` in the study in scope, and which ones there are: what
    ``ceres-pull`` and the API say instead of "No ReleaseRequest matches the given query"."""
    text = str(number)
    named = f"release-{int(text):04d}" if text.isascii() and text.isdigit() and len(text) <= 9 else \
        f"release {text[:40]!r}"
    published = [f"release-{n:04d}" for n in released_requests().order_by("number").values_list("number", flat=True)
                 [:MAX_NAMED]]
    more = released_requests().count() - len(published)
    # Only a superseded release is named as such (its page says so to researchers too); a draft, a request awaiting
    # approval or a rejected one is not a researcher's business, so it reads like one that does not exist.
    superseded = named.startswith("release-") and ReleaseRequest.objects.filter(
        number=int(text), state=ReleaseRequest.State.SUPERSEDED).exists()
    why = " (it was superseded after a consent withdrawal)" if superseded else ""
    listed = (f"its published releases: {', '.join(published)}{f' and {more} more' if more > 0 else ''}"
              if published else "it has no published release yet")
    return f"{named} is not a published release of study {study_code}{why}; {listed}"


def released_items() -> QuerySet[ReleaseItem]:
    """Every episode of every published release of the study in scope, and of a superseded one while its
    successor is on its way, the episodes the successor holds."""
    return _released_items(_still_serving())


def _released_items(still_serving: list[int]) -> QuerySet[ReleaseItem]:
    # The superseded releases still serving are read first (none, or a handful while a withdrawal's release is on
    # its way): with none, the list is the published releases' alone, read from the browse index in its order,
    # which an OR over the successor's state would keep the planner from doing.
    published = ReleaseItem.objects.filter(request__state=RELEASED)
    if not still_serving:
        return published
    return ReleaseItem.objects.filter(Q(request__state=RELEASED) | Q(_kept(), request__in=still_serving))


def _still_serving_query(requests: QuerySet[ReleaseRequest]) -> QuerySet:
    return requests.filter(state=SUPERSEDED, superseded_by__state__in=ON_ITS_WAY).values_list("pk")


# The queries of a researcher's browse page whose shape never changes, in one study's scope: compiled once per
# process and run with the study (``core.fixed_query``), each the scoped ORM query with the scope's filter written
# out (tests compare their SQL). What they read is read anew on every request.
_STILL_SERVING = in_study(lambda study_id: _still_serving_query(ReleaseRequest.objects.filter(study_id=study_id)))
_PUBLISHED_TAGS = in_study(lambda study_id: _tag_menus(
    EpisodeTag.objects.filter(study_id=study_id),
    ReleaseItem.objects.filter(study_id=study_id).filter(request__state=RELEASED)))
_RELEASE_NUMBERS = in_study(lambda study_id: _release_numbers(ReleaseRequest.objects.filter(study_id=study_id)))


def _tag_menus(tags: QuerySet[EpisodeTag], released: QuerySet[ReleaseItem]) -> QuerySet:
    """Every (kind, value) of the tags of the ``released`` episodes, in order: every kind's menu in one query."""
    return (tags.filter(kind__in=EpisodeTag.Kind.values, episode__in=released.values("episode"))
            .values_list("kind", "value").distinct().order_by("kind", "value"))


def _release_numbers(requests: QuerySet[ReleaseRequest]) -> QuerySet:
    return (requests.filter(Q(state=RELEASED) | Q(state=SUPERSEDED, superseded_by__state__in=ON_ITS_WAY))
            .order_by("-number").values_list("number"))


def _still_serving() -> list[int]:
    study_id = scoped_study_id()
    rows = (_STILL_SERVING.rows(study_id=study_id) if study_id is not None
            else _still_serving_query(ReleaseRequest.objects.all()))
    return [pk for (pk,) in rows]


def browse_menus() -> tuple[QuerySet[ReleaseItem], dict[str, list[str]], list[int]]:
    """``released_items()`` and what the browse filters offer of them: the values of their episodes' tags by kind
    (each kind in ``EpisodeTag.Kind`` order, values sorted) and the numbers of ``released_requests()``, newest
    first."""
    still_serving = _still_serving()
    released = _released_items(still_serving)
    study_id = scoped_study_id()
    if study_id is None:
        tags, numbers = _tag_menus(EpisodeTag.objects.all(), released), _release_numbers(ReleaseRequest.objects.all())
    else:
        tags = (_tag_menus(EpisodeTag.objects.all(), released) if still_serving
                else _PUBLISHED_TAGS.rows(study_id=study_id))
        numbers = _RELEASE_NUMBERS.rows(study_id=study_id)
    values: dict[str, list[str]] = {kind: [] for kind in EpisodeTag.Kind.values}
    for kind, value in tags:
        values[kind].append(value)
    return released, values, [number for (number,) in numbers]


def released_item(number: int, episode_index: int) -> ReleaseItem:
    return get_object_or_404(released_items().select_related("request__study", "episode__recording__demonstrator"),
                             request__number=number, episode_index=episode_index)


def successor_item(number: int, episode_index: int) -> ReleaseItem | None:
    """The same episode in the release that superseded release ``number`` (through every withdrawal since), once
    that one serves it: where an old bookmark leads. None when none does (the old one may still serve it)."""
    release = ReleaseRequest.objects.filter(number=number, state=SUPERSEDED).first()
    while release is not None:
        successor = ReleaseRequest.objects.filter(supersedes=release).first()
        if successor is None or not successor.items.filter(episode_index=episode_index).exists():
            return None
        if serving(successor):
            return successor.items.get(episode_index=episode_index)
        release = successor if successor.state == SUPERSEDED else None
    return None


def release_files(release: ReleaseRequest) -> dict[str, tuple[str, int | None]]:
    """Every object of a published release by its path in the release folder: its storage key, and the study
    episode it belongs to (None for the manifest, its signature and the dataset card and metadata files). Of a
    superseded release still serving, the files of the episodes its successor holds (its manifest and card name
    withdrawn episodes no longer there)."""
    if release.state == SUPERSEDED:
        files = {}
        items = ReleaseItem.objects.filter(request=release).filter(_kept())
    else:
        cards = sorted(Release.objects.filter(request=release).values_list("card_files", flat=True).first() or {})
        files = {name: (release.prefix + name, None) for name in (MANIFEST, SIGNATURE, *cards)}
        items = release.items.all()
    published = redacted.released_files(release)  # redacted episodes: the derived shards' files
    for item in items.only("episode_index", "files"):
        for entry in published.get(item.episode_index, (None, item.files))[1]:
            path = f"{item.folder}/{entry['path']}"
            files[path] = (release.prefix + path, item.episode_index)
    return files


def unavailable(items: list[ReleaseItem]) -> list[str]:
    """Why each of ``items`` may not be given out now (empty: all may): its release is no longer published (nor
    superseded by one that serves the same episode), or its demonstrator's consent no longer covers it."""
    problems = []
    releases = {item.request_id: item.request for item in items}
    for release in releases.values():
        if not serving(release) and not all(_moved(item) for item in items if item.request_id == release.pk):
            problems.append(f"{release.release_id} is {release.get_state_display().lower()}, not published")
    recordings = [item.episode.recording for item in items]
    checks = gate.consent_checks(recordings)
    for item in items:
        failing = [check.detail for check in checks[item.episode.recording_id] if not check.passed]
        if failing:
            problems.append(f"{item.request.release_id}/{item.folder} is no longer available: {'; '.join(failing)}")
    return problems


def _moved(item: ReleaseItem) -> bool:
    """An episode of a superseded release that the release superseding it serves, unchanged (a one-dataset
    download built from the old release keeps its unaffected episodes)."""
    if item.request.state != SUPERSEDED:
        return False
    moved = successor_item(item.request.number, item.episode_index)
    return moved is not None and (moved.capture_id, moved.receipt_sha256) == (item.capture_id, item.receipt_sha256)


def require_available(items: list[ReleaseItem]) -> None:
    problems = unavailable(items)
    if problems:
        raise AccessRefused("; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else ""))


def lock_demonstrators(items: list[ReleaseItem]) -> None:
    """Lock the rows of the items' demonstrators until the transaction ends, before consent is read: a withdrawal
    locks the same row, so a link racing it is issued before it commits (and is in its reach) or sees it."""
    demonstrators = {item.episode.recording.demonstrator_id for item in items} - {None}
    list(Demonstrator.objects.select_for_update(no_key=True).filter(pk__in=sorted(demonstrators)).values_list(
        "pk", flat=True))
