"""Short-lived signed download links, issued only after a live check of the researcher's grant and agreement
and of the data's release and consent state; every link is an ``IssuedLink`` row and an audit event.

On S3 a link is a presigned GET that the storage itself refuses after ``CERES_DOWNLOAD_LINK_SECONDS``; on local
folders it is a portal URL carrying a signed, expiring token (``/downloads/<token>``), checked by ``resolve``.
Either way the link names one object: altering it to reach another breaks its signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import PurePosixPath

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django_scopes import scopes_disabled

from portal.audit.services import Entry, record_many
from portal.core import storage
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.research.exceptions import AccessRefused, LinkRefused, ResearchError
from portal.research.models import Dataset, IssuedLink
from portal.research.services import catalogue, datasets
from portal.research.services.access import check_access

SALT = "ceres.research.download-link"


@dataclass(frozen=True)
class Link:
    path: str
    url: str
    expires_at: datetime


def _choose(files: dict[str, tuple[str, int | None]], paths: list[str] | None) -> list[tuple[str, str, int | None]]:
    """The asked paths (every file when ``paths`` is empty or None), each with its object and episode."""
    wanted = list(files) if not paths else list(dict.fromkeys(paths))
    unknown = [path for path in wanted if path not in files]
    if unknown:
        raise ResearchError(f"not a file of this release or dataset: {', '.join(unknown[:3])}")
    if len(wanted) > settings.CERES_LINKS_PER_REQUEST:
        raise ResearchError(f"at most {settings.CERES_LINKS_PER_REQUEST} links per request; ask for the files in "
                            f"parts")
    return [(path, *files[path]) for path in wanted]


def release_links(user, release: ReleaseRequest, paths: list[str] | None = None, *, via: str,
                  now: datetime | None = None) -> list[Link]:
    """Links to files of a published release (all of them, manifest and signature included, when ``paths`` is
    empty), after the live check of ``user`` and of every episode the files belong to."""
    chosen = _choose(catalogue.release_files(release), paths)
    indexes = {episode_index for _, _, episode_index in chosen if episode_index is not None}
    return _issue(user, release.study, chosen, items=release_items(release, indexes), release=release, via=via,
                  now=now)


def dataset_links(user, dataset: Dataset, paths: list[str] | None = None, *, via: str,
                  now: datetime | None = None) -> list[Link]:
    """Links to files of a ready one-dataset download, after the live check of ``user`` and of every episode in
    it (a dataset holds every episode in each of its files)."""
    if dataset.state != Dataset.State.READY:
        raise ResearchError(f"{dataset.dataset_id} is {dataset.get_state_display().lower()}, not ready")
    chosen = _choose(datasets.dataset_files(dataset), paths)
    return _issue(user, dataset.study, chosen, items=dataset_items(dataset), dataset=dataset, via=via, now=now)


def _issue(user, study, chosen, *, items: list[ReleaseItem], via: str, release: ReleaseRequest | None = None,
           dataset: Dataset | None = None, now: datetime | None = None) -> list[Link]:
    now = now or timezone.now()
    with transaction.atomic():
        live_check(user, study, items=items, release=release, now=now)
        expires_at = now + timedelta(seconds=settings.CERES_DOWNLOAD_LINK_SECONDS)
        rows = IssuedLink.objects.bulk_create([
            IssuedLink(study=study, user=user, release=release, dataset=dataset, episode_index=episode_index,
                       path=path, object_name=name, issued_at=now, expires_at=expires_at, via=via)
            for path, name, episode_index in chosen])
        target = release if release is not None else dataset
        record_many(Entry(user, "research.link_issued", target, study=study, after={
            "link": row.pk, "object": row.object_name, "path": row.path, "via": via,
            "expires_at": expires_at.isoformat(),
            "release": release.release_id if release else None, "dataset": dataset.dataset_id if dataset else None,
        }) for row in rows)
    return [Link(row.path, _url(row), expires_at) for row in rows]


def live_check(user, study, *, items: list[ReleaseItem], release: ReleaseRequest | None = None,
               now: datetime | None = None) -> None:
    """The check before anything of a release or dataset is given out, inside the caller's transaction: the
    demonstrators' rows locked (a withdrawal racing it waits, or is seen), ``user``'s unexpired grant and
    acceptance of the current agreement, ``release`` published (or still serving), and consent for ``items``."""
    catalogue.lock_demonstrators(items)
    check_access(user, study, now=now)
    if release is not None and not catalogue.serving(release):
        raise AccessRefused(f"{release.release_id} is {release.get_state_display().lower()}, not published")
    catalogue.require_available(items)


def release_items(release: ReleaseRequest, indexes: set[int] | None = None) -> list[ReleaseItem]:
    """The items of ``release`` (those of ``indexes`` when given) as the live check reads them."""
    items = ReleaseItem.objects.filter(request=release)
    if indexes is not None:
        items = items.filter(episode_index__in=indexes)
    return list(items.select_related("request", "episode__recording__demonstrator"))


def dataset_items(dataset: Dataset) -> list[ReleaseItem]:
    """The items every file of ``dataset`` holds (a dataset holds every episode in each of its files)."""
    return list(ReleaseItem.objects.filter(pk__in=dataset.episodes.values("item"))
                .select_related("request", "episode__recording__demonstrator"))


def open_in_viewer(user, item: ReleaseItem, *, part: str, audited: bool = True) -> None:
    """The live check before the read-only viewer serves a released episode's data or video (``part``): the
    same as before a link (grant, current agreement, release published, consent), and an audit event of who
    viewed what (``audited``: the viewer's first request of each part, not every Range of the video)."""
    with transaction.atomic():
        catalogue.lock_demonstrators([item])
        check_access(user, item.study)
        catalogue.require_available([item])
        if audited:
            record_many([Entry(user, "research.episode_viewed", item.request, study=item.study, after={
                "release": item.request.release_id, "episode": item.folder, "part": part})])


def _url(link: IssuedLink) -> str:
    filename = PurePosixPath(link.path).name
    seconds = max(1, int((link.expires_at - link.issued_at).total_seconds()))
    presigned = storage.presigned_url(storage.releases(), link.object_name, filename=filename, seconds=seconds)
    if presigned is not None:
        return presigned
    token = signing.dumps({"l": link.pk, "o": link.object_name, "f": filename,
                           "x": int(link.expires_at.timestamp())}, salt=SALT, compress=True)
    return reverse("research-download", args=[token])


@dataclass(frozen=True)
class Download:
    object_name: str
    filename: str
    link_id: int | None = None


def resolve(token: str, *, now: datetime | None = None) -> Download:
    """The object a portal download link names, if its signature holds and it has not expired."""
    now = now or timezone.now()
    try:
        payload = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        raise LinkRefused("this download link is not valid (altered or not issued by this portal)") from None
    if payload.get("x", 0) <= now.timestamp():
        raise LinkRefused("this download link has expired; ask the portal for a new one",
                          link_pk=payload.get("l") if isinstance(payload.get("l"), int) else None)
    return Download(payload["o"], payload["f"], payload.get("l"))


def record_fetch(download: Download, span: tuple[int, int], size: int) -> None:
    """An audit event for each fetch through a portal download link that serves bytes (the link is a bearer
    capability, so the actor is the link, issued to its researcher): the link, the object and the bytes served.
    On S3 the storage serves the link itself; its access log is the record there."""
    with scopes_disabled():
        link = IssuedLink.objects.select_related("user", "release", "dataset").filter(pk=download.link_id).first()
    issued_to = link.user.get_username() if link is not None else None
    record_many([Entry(f"download link {download.link_id}", "research.link_fetched", link, after={
        "link": download.link_id, "object": download.object_name, "issued_to": issued_to,
        "first_byte": span[0], "last_byte": span[1], "size": size,
        "release": link.release.release_id if link is not None and link.release else None,
        "dataset": link.dataset.dataset_id if link is not None and link.dataset else None})])
