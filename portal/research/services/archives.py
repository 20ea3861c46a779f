"""A whole published release or ready one-dataset download as one ZIP, built while it is sent.

The ZIP is stored, not compressed (the parquet and MP4 files are compressed already), so its length is known
before the first byte from the signed manifest's file lengths: the browser shows progress. Its one folder,
``<study>-<release or dataset id>/``, is laid out as ``ceres-pull`` writes one (the manifest and its signature
included), so ``python -m exporter verify-release`` checks it once unzipped.

Before anything is sent, the same live check as a link (``links.live_check``: grant, current agreement, release
published, consent for every episode), in one transaction with a row per file given out (``IssuedLink``, via
zip: a later withdrawal reaches whoever received it) and one audit event, ``research.archive_downloaded``.

Each object is then read from the storage in blocks (on S3 the GET response's body as it arrives), never whole
and never into a temporary file, its SHA-256 and length checked as it passes. An object that does not match the
manifest raises ``ObjectMismatch`` inside the stream and is logged as an error: the response is cut before the
ZIP's central directory, so the browser shows a failed download, never a complete-looking ZIP with wrong bytes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO

from django.conf import settings
from django.core.files.storage import Storage
from django.db import transaction
from django.utils import timezone
from zipstream import ZIP_STORED, ZipStream

from exporter import release as release_format
from portal.audit.services import Entry, record_many
from portal.core import storage
from portal.core.storage import ObjectMismatch
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.research.exceptions import ResearchError
from portal.research.models import Dataset, IssuedLink
from portal.research.services import catalogue, datasets, links

logger = logging.getLogger(__name__)

ACTION = "research.archive_downloaded"


@dataclass(frozen=True)
class Member:
    """One file of the ZIP: its path in the release or dataset folder, its object, the study episode it belongs
    to (None for a dataset's files and for the manifest and signature), and the length and SHA-256 it must have."""

    path: str
    object_name: str
    episode_index: int | None
    size: int
    sha256: str


@dataclass
class Archive:
    """A ZIP ready to be sent: ``filename`` to save it as, its exact ``size``, and ``chunks()`` to stream it."""

    filename: str
    folder: str
    members: list[Member]
    size: int
    _zip: ZipStream

    def chunks(self) -> Iterator[bytes]:
        return iter(self._zip)


def _entries(manifest: bytes, signature: bytes, *, names: tuple[str, str]) -> list[tuple[str, int, str]]:
    """Path, length and SHA-256 of every file of a signed manifest, the manifest and its signature first."""
    files = release_format.manifest_files(release_format.read_manifest(manifest))
    return [(names[0], len(manifest), hashlib.sha256(manifest).hexdigest()),
            (names[1], len(signature), hashlib.sha256(signature).hexdigest()),
            *((entry["path"], entry["bytes"], entry["sha256"]) for entry in files)]


def _members(entries: list[tuple[str, int, str]], objects: dict[str, tuple[str, int | None]],
             what: str) -> list[Member]:
    """The members, each object as the links name it; the manifest and the objects must name the same files."""
    missing = [path for path, _, _ in entries if path not in objects]
    extra = sorted(set(objects) - {path for path, _, _ in entries})
    if missing or extra:
        raise ResearchError(f"{what}'s files do not match its signed manifest "
                            f"({', '.join((missing + extra)[:3])}); it cannot be sent as one ZIP")
    return [Member(path, objects[path][0], objects[path][1], size, sha256) for path, size, sha256 in entries]


def release_archive(user, release: ReleaseRequest, *, now: datetime | None = None) -> Archive:
    """Every file of the published ``release`` as one ZIP, after the live check (audited)."""
    if release.state != ReleaseRequest.State.RELEASED:
        # A superseded release still serving gives out only its unaffected episodes, so its signed manifest (which
        # names the withdrawn ones) no longer describes what it serves: no ZIP that could not be verified.
        raise ResearchError(f"{release.release_id} was superseded after a consent withdrawal: its files are given "
                            f"out one by one until the release replacing it is published, not as one ZIP")
    published = release.release
    members = _members(_entries(bytes(published.manifest), bytes(published.signature),
                                names=(release_format.MANIFEST, release_format.SIGNATURE)),
                       catalogue.release_files(release), release.release_id)
    return _checked(user, release.study, members, items=links.release_items(release), release=release,
                    name=f"{release.study.code}-{release.release_id}", now=now)


def dataset_archive(user, dataset: Dataset, *, now: datetime | None = None) -> Archive:
    """Every file of the ready ``dataset`` as one ZIP, after the live check of every episode it holds (audited)."""
    if dataset.state != Dataset.State.READY:
        raise ResearchError(f"{dataset.dataset_id} is {dataset.get_state_display().lower()}, not ready")
    members = _members(_entries(bytes(dataset.manifest), bytes(dataset.signature),
                                names=(release_format.DATASET_MANIFEST, release_format.DATASET_SIGNATURE)),
                       datasets.dataset_files(dataset), dataset.dataset_id)
    return _checked(user, dataset.study, members, items=links.dataset_items(dataset), dataset=dataset,
                    name=f"{dataset.study.code}-{dataset.dataset_id}", now=now)


def _checked(user, study, members: list[Member], *, items: list[ReleaseItem], name: str,
             release: ReleaseRequest | None = None, dataset: Dataset | None = None,
             now: datetime | None = None) -> Archive:
    now = now or timezone.now()
    archive = build(members, folder=name, store=storage.releases())
    with transaction.atomic():
        links.live_check(user, study, items=items, release=release, now=now)
        expires_at = now + timedelta(seconds=settings.CERES_DOWNLOAD_LINK_SECONDS)
        IssuedLink.objects.bulk_create([
            IssuedLink(study=study, user=user, release=release, dataset=dataset, episode_index=member.episode_index,
                       path=member.path, object_name=member.object_name, issued_at=now, expires_at=expires_at,
                       via=IssuedLink.Via.ZIP) for member in members])
        record_many([Entry(user, ACTION, release if release is not None else dataset, study=study, after={
            "release": release.release_id if release else None, "dataset": dataset.dataset_id if dataset else None,
            "files": len(members), "bytes": sum(member.size for member in members), "zip_bytes": archive.size,
            "filename": archive.filename})])
    return archive


def build(members: list[Member], *, folder: str, store: Storage,
          opener: Callable[[str], Iterable[bytes]] | None = None) -> Archive:
    """The stored ZIP of ``members`` under ``folder/``, its length computed before anything is read. ``opener``
    (tests, the benchmark): what reads an object's blocks instead of ``store``."""
    archive = ZipStream(compress_type=ZIP_STORED, sized=True)
    for member in members:
        blocks = opener(member.object_name) if opener is not None else _blocks(store, member.object_name)
        archive.add(checked(blocks, member), f"{folder}/{member.path}", size=member.size)
    return Archive(filename=f"{folder}.zip", folder=folder, members=members, size=len(archive), _zip=archive)


def _blocks(store: Storage, name: str) -> Iterator[bytes]:
    """An object's bytes in blocks as the storage gives them (opened only when the ZIP reaches it)."""
    with storage.stream(store, name) as source:
        yield from _read(source)


def _read(source: IO[bytes]) -> Iterator[bytes]:
    while block := source.read(storage.CHUNK):
        yield block


def checked(blocks: Iterable[bytes], member: Member) -> Iterator[bytes]:
    """``blocks`` passed on as they come, never past ``member.size``, hashed on the way; ``ObjectMismatch`` (logged
    as an error) when the object is longer or shorter than that or its SHA-256 is not the manifest's."""
    hasher, seen = hashlib.sha256(), 0
    try:
        for block in blocks:
            seen += len(block)
            if seen > member.size:
                raise ObjectMismatch(f"{member.object_name}: longer than the {member.size} bytes its manifest gives")
            hasher.update(block)
            yield block
        if seen != member.size:
            raise ObjectMismatch(f"{member.object_name}: {seen} bytes stored, its manifest gives {member.size}")
        if hasher.hexdigest() != member.sha256:
            raise ObjectMismatch(f"{member.object_name}: the stored object's SHA-256 is not its manifest's")
    except ObjectMismatch as mismatch:
        logger.error("ZIP download cut: %s", mismatch)
        raise
    except FileNotFoundError:
        logger.error("ZIP download cut: %s is no longer stored", member.object_name)
        raise
