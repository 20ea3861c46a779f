"""One-dataset downloads: a researcher's selection of released episodes (any subset, across releases of one
study) assembled as one LeRobot v3 dataset by the exporter's ``assemble``, stored in the ``releases`` storage
under ``datasets/<study>/dataset-NNNN/`` with a signed ``dataset-manifest.json``. An identical selection (the
same episodes with the same receipts) reuses the stored dataset.

The build (``build_dataset``, a task on the heavy queue) takes a lease like the release job, fetches every
shard file from the published release and checks it against the frozen digests, assembles in a scratch folder,
uploads every file and checks it read back from storage, then signs and writes the manifest last. A re-run
after a kill or an outage counts the objects already in place; the dataset is ``ready`` only once the prefix
holds exactly the manifest's objects.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from exporter import cards
from exporter import release as release_format
from exporter.assemble import assemble_dataset
from exporter.errors import AssemblyError
from exporter.jsonfile import json_bytes
from exporter.receipt import bytes_digest, file_digest, folder_files
from exporter.timestamps import rfc3339
from portal.audit.services import chain_head, record
from portal.core import leases, queue, signing, storage
from portal.core.states import transition
from portal.releases.models import ReleaseItem
from portal.releases.services import cards as release_cards
from portal.releases.services import redacted
from portal.research import notices
from portal.research.exceptions import AccessRefused, ResearchError
from portal.research.models import Dataset, DatasetEpisode, DatasetRequester
from portal.research.services import catalogue
from portal.research.services.access import check_access
from portal.studies.models import Study

State = Dataset.State
_PROGRESS_EVERY_SECONDS = 1.0


def selection_digest(items: list[ReleaseItem]) -> str:
    """What makes two selections identical: the same episodes with the same receipts, each from the same release.
    The release counts: a dataset names each episode's source release in its files, so the same episodes chosen
    from a release that superseded another are a new dataset, not the old one (which is given out while each of
    its episodes is served by its source release or the release that superseded it, ``catalogue.unavailable``)."""
    chosen = sorted([item.episode_index, item.receipt_sha256, item.request_id] for item in items)
    return bytes_digest(json_bytes(chosen))[0]


def _one_per_episode(items: list[ReleaseItem]) -> list[ReleaseItem]:
    """An episode chosen from several releases is taken once, from its newest release."""
    chosen: dict[int, ReleaseItem] = {}
    for item in sorted(items, key=lambda item: (item.episode_index, -item.request.number)):
        chosen.setdefault(item.episode_index, item)
    return [chosen[index] for index in sorted(chosen)]


@transaction.atomic
def request_dataset(user, study: Study, items: list[ReleaseItem]) -> tuple[Dataset, bool]:
    """Ask for the released ``items`` as one dataset; returns it and whether a stored one was reused. The build is
    queued once, after the transaction commits."""
    check_access(user, study)
    if not items:
        raise ResearchError("choose at least one released episode")
    if any(item.study_id != study.pk for item in items):
        raise ResearchError(f"a one-dataset download holds episodes of one study ({study.code}) only")
    items = _one_per_episode(items)

    catalogue.lock_demonstrators(items)
    if len(items) > settings.CERES_DATASET_MAX_EPISODES:
        raise ResearchError(f"a one-dataset download holds at most {settings.CERES_DATASET_MAX_EPISODES} episodes; "
                            f"{len(items)} were chosen")
    catalogue.require_available(items)
    digest = selection_digest(items)
    Study.objects.select_for_update(no_key=True).only("pk").get(pk=study.pk)  # serialises numbering and reuse per study
    dataset = Dataset.objects.filter(selection_sha256=digest).first()
    reused = dataset is not None
    if dataset is None:
        number = (Dataset.objects.aggregate(last=Max("number"))["last"] or 0) + 1
        dataset = Dataset.objects.create(study=study, number=number, selection_sha256=digest, requested_by=user,
                                         episode_count=len(items))
        DatasetEpisode.objects.bulk_create(DatasetEpisode(study=study, dataset=dataset, item=item, episode_index=new)
                                           for new, item in enumerate(items))
        queue.enqueue("research.build_dataset", dataset.pk)
    elif dataset.state == State.FAILED:
        _move(None, dataset, State.QUEUED, action="research.dataset_requeued", last_error="")
        queue.enqueue("research.build_dataset", dataset.pk)
    try:
        with transaction.atomic():
            DatasetRequester.objects.get_or_create(study=study, dataset=dataset, user=user)
    except IntegrityError:  # the same person asking twice at once
        pass
    record(user, "research.dataset_requested", dataset, study=study,
           after={"dataset": dataset.dataset_id, "episodes": len(items), "selection_sha256": digest,
                  "reused": reused, "state": dataset.state})
    return dataset, reused


def dataset_files(dataset: Dataset) -> dict[str, tuple[str, None]]:
    """Every object of a ready dataset by its path in the dataset folder (the manifest and its signature too)."""
    manifest = release_format.parse_signed_manifest(bytes(dataset.manifest), bytes(dataset.signature),
                                                     signing.public_key(), name=release_format.DATASET_MANIFEST)
    paths = [entry["path"] for entry in release_format.manifest_files(manifest)]
    return {path: (dataset.prefix + path, None)
            for path in [release_format.DATASET_MANIFEST, release_format.DATASET_SIGNATURE, *paths]}


# --- the build -------------------------------------------------------------------------------------------


def _snapshot(dataset: Dataset) -> dict:
    return {"state": dataset.state, "last_error": dataset.last_error}


def _move(actor, dataset: Dataset, state: str, *, action: str, after: dict | None = None, if_allowed: bool = False,
          **fields) -> None:
    """``core.states.transition`` with the dataset's audit snapshot, then its notification."""
    if transition(actor, dataset, state, action=action, snapshot=_snapshot, after=after, if_allowed=if_allowed,
                  **fields):
        notices.dataset_moved(dataset)


def claim_dataset(dataset_id: int) -> Dataset | None:
    """Take the build lease; None when there is nothing to do (ready, or failed until asked for again)."""
    with transaction.atomic():
        dataset = leases.lock(Dataset, "study", pk=dataset_id)
        if dataset.state not in (State.QUEUED, State.BUILDING):
            return None
        now = timezone.now()
        lease = leases.take(dataset, now)
        dataset.assembled_at = dataset.assembled_at or now
        if dataset.state == State.QUEUED:
            _move(None, dataset, State.BUILDING, action="research.dataset_build_started",
                  after={"attempt": dataset.attempts}, assembled_at=dataset.assembled_at, **lease)
        else:
            dataset.save()
            record(None, "research.dataset_build_resumed", dataset, after={"attempt": dataset.attempts})
        return dataset


class _Progress:
    """Writes the phase and its progress (and renews the lease) at most once a second, and at each phase's end."""

    def __init__(self, dataset: Dataset):
        self.heartbeat = leases.Heartbeat(dataset, every=_PROGRESS_EVERY_SECONDS)

    def __call__(self, phase: str, done: int, total: int, *, force: bool = False) -> None:
        self.heartbeat(force=force or done >= total, phase=phase, done=done, total=total)


def build_dataset(dataset_id: int) -> Dataset | None:
    """Fetch, assemble, upload, sign, check; mark ready only when everything is in place. A shard that does not
    match its release's digests, an episode no longer available, or shards that cannot be assembled fail the
    build visibly; storage errors propagate (the task retries)."""
    dataset = claim_dataset(dataset_id)
    if dataset is None:
        return None
    try:
        _build(dataset)
    except (storage.ObjectMismatch, FileNotFoundError, AssemblyError, AccessRefused, cards.CardProblem) as exc:
        fail_dataset(dataset, f"build failed: {exc}")
    return dataset


def _build(dataset: Dataset) -> None:
    progress = _Progress(dataset)
    members = list(dataset.episodes.select_related("item__request__study", "item__episode__recording__demonstrator")
                   .order_by("episode_index"))
    items = [member.item for member in members]
    catalogue.require_available(items)
    releases = storage.releases()
    with tempfile.TemporaryDirectory(prefix="ceres-dataset-") as scratch:
        root = Path(scratch)
        shard_dirs = _fetch_shards(items, root / "shards", progress)
        progress("assembling", 0, 1, force=True)
        result = assemble_dataset(root / "dataset", shard_dirs, created_at=dataset.assembled_at, order="index")
        if [e.source_episode_index for e in result.episodes] != [item.episode_index for item in items]:
            raise AssemblyError("the assembled episodes are not in the order of the selection")
        folder = root / "dataset"
        files = [{"path": name, **dict(zip(("sha256", "bytes"), file_digest(folder / name), strict=True))}
                 for name in folder_files(folder)]
        section = _section(dataset, members, result, files)
        made = cards.card_files(
            release_cards.facts(dataset.study, kind="dataset", identifier=dataset.dataset_id, number=dataset.number,
                                published=dataset.assembled_at, digest=release_format.section_digest(section)),
            [cards.read_part(folder)], files)
        progress("uploading", 0, len(files), force=True)
        expected = set()
        for done, entry in enumerate(files, start=1):
            name = dataset.prefix + entry["path"]
            expected.add(name)
            if not storage.matches(releases, name, entry["sha256"], entry["bytes"]):
                storage.put_checked(releases, name, folder / entry["path"], entry["sha256"], entry["bytes"])
            progress("uploading", done, len(files))
    progress("signing", 0, 1, force=True)
    data, signature = _sign(dataset, section, made)
    # The card and metadata files, then the manifest that lists them and its signature, last.
    for filename, content in (*made.items(), (release_format.DATASET_MANIFEST, data),
                              (release_format.DATASET_SIGNATURE, signature)):
        name = dataset.prefix + filename
        expected.add(name)
        sha256, size = bytes_digest(content)
        if not storage.matches(releases, name, sha256, size):
            storage.put_checked(releases, name, ContentFile(content), sha256, size)
    for extra in sorted(set(storage.walk(releases, dataset.prefix)) - expected):
        releases.delete(extra)  # left by an earlier attempt that did not get this far
    if set(storage.walk(releases, dataset.prefix)) != expected:
        raise storage.ObjectMismatch(f"{dataset.prefix} does not hold exactly the manifest's objects")
    with transaction.atomic():
        locked = Dataset.objects.select_for_update(of=("self",), no_key=True).select_related("study").get(pk=dataset.pk)
        if locked.state != State.BUILDING:  # removed meanwhile (a withdrawal): nothing it stored may stay
            storage.delete_prefix(releases, dataset.prefix)
            return
        _move(None, locked, State.READY, action="research.dataset_ready",
              after={"files": len(files) + len(made) + 2, "manifest_sha256": locked.manifest_sha256},
              files_total=len(files) + len(made) + 2, bytes_total=sum(entry["bytes"] for entry in files)
              + sum(map(len, made.values())) + len(data) + len(signature),
              finished_at=timezone.now(), lease_until=None, last_error="", phase="",
              done=0, total=0)


def _fetch_shards(items: list[ReleaseItem], root: Path, progress: _Progress) -> list[Path]:
    """Each episode's shard from its published release, every file checked against the frozen digests."""
    releases = storage.releases()
    published = {request_id: redacted.released_files(request)
                 for request_id, request in {item.request_id: item.request for item in items}.items()}
    files = {item.pk: published[item.request_id].get(item.episode_index, (None, item.files))[1] for item in items}
    total = sum(len(listed) for listed in files.values())
    done = 0
    progress("fetching", 0, total, force=True)
    shard_dirs = []
    for item in items:
        shard = root / f"{item.request.release_id}-{item.folder}"
        for entry in files[item.pk]:  # a redacted episode's: its derived shard's, as its release published it
            name = f"{item.request.prefix}{item.folder}/{entry['path']}"
            storage.fetch_checked(releases, name, shard / entry["path"], entry["sha256"], entry["bytes"])
            done += 1
            progress("fetching", done, total)
        shard_dirs.append(shard)
    return shard_dirs


def _released_receipt(item: ReleaseItem) -> str:
    """The receipt of the shard its release published: the derived one of a redacted episode."""
    return redacted.released_files(item.request).get(item.episode_index, (item.receipt_sha256, None))[0]


def _section(dataset: Dataset, members: list[DatasetEpisode], result, files: list[dict]) -> dict:
    return release_format.dataset_section(
        study=dataset.study.code, dataset_id=dataset.dataset_id, created_at=rfc3339(dataset.assembled_at),
        episodes=[{"episode_index": assembled.episode_index, "episode_id": assembled.episode_id,
                   "source_release": member.item.request.release_id,
                   "source_episode_index": member.item.episode_index,
                   "source_receipt_sha256": _released_receipt(member.item)}
                  for member, assembled in zip(members, result.episodes, strict=True)],
        files=files, dataset_receipt_sha256=result.receipt_sha256)


def _sign(dataset: Dataset, section: dict, made: dict[str, bytes]) -> tuple[bytes, bytes]:
    """The manifest of the dataset ``section`` and its card and metadata files ``made``, and its signature."""
    now = timezone.now()
    data = release_format.dataset_manifest_bytes(dataset=section, signed_at=rfc3339(now),
                                                  audit_chain_head=chain_head(),
                                                  card_files=release_format.card_entries(made))
    signature = release_format.sign(signing.signing_key(), data)
    with transaction.atomic():
        sha256 = bytes_digest(data)[0]
        Dataset.objects.filter(pk=dataset.pk).update(manifest=data, signature=signature, manifest_sha256=sha256,
                                                     key_fingerprint=signing.key_fingerprint())
        record(None, "research.dataset_signed", dataset, after={"manifest_sha256": sha256,
                                                                "key_fingerprint": signing.key_fingerprint()})
    return data, signature


def note_retry(dataset: Dataset, exc: BaseException, countdown: float) -> None:
    """A transient storage error: the lease is given back and the task retries after ``countdown`` seconds."""
    leases.give_back(dataset, last_error=leases.retry_note(exc, countdown))


def fail_dataset(dataset: Dataset, reason: str) -> None:
    """The build gave up: the dataset shows why; asking for the same selection again queues it again."""
    with transaction.atomic():
        locked = Dataset.objects.select_for_update(of=("self",), no_key=True).select_related("study").get(pk=dataset.pk)
        _move(None, locked, State.FAILED, action="research.dataset_failed", if_allowed=True,
              last_error=reason[:2000], lease_until=None)
