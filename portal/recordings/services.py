"""The recording pipeline: ingest (validate, quarantine or accept), export, verification, audio retention.

Views, the API, the admin, management commands and Celery tasks all call these functions; every
state change is audited through ``portal.audit.services.record``.

Storage layout (see docs/pipeline.md):
- ``captures``: ``<study>/<recording uid>/incoming/<name>`` (an upload awaiting ingest, deleted after it),
  ``.../source/<path>`` (the silent capture source that exports read), ``.../audio/<path>.enc`` (kept raw
  audio, encrypted with the recording's key).
- ``shards``: ``<study>/episode-NNNNNN/...``: objects are uploaded to their final keys with the receipt
  last; the database (``Episode.exported_at``) is the truth, so objects under a prefix whose episode is
  not marked exported are leftovers of an interrupted attempt and are deleted before the next one.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from exporter.errors import SourceError
from exporter.receipt import RECEIPT
from exporter.shard import export_shard
from exporter.source import Capture, read_capture, unpack_source
from exporter.tasks import extend_tasks
from exporter.video import strip_audio
from portal.audit.services import record
from portal.recordings import audio, storage
from portal.recordings.models import (
    Alert,
    AudioKey,
    Episode,
    PurgeReceipt,
    Recording,
    RecordingLog,
    StudyDataset,
    Verification,
)
from portal.recordings.sources import content_digest, source_files
from portal.studies import services as registry
from portal.studies.models import ConsentEvent, Demonstrator, Headset, Study

log = logging.getLogger(__name__)

RELEASE = ConsentEvent.Scope.EPISODE_RELEASE
AUDIO_RETENTION = ConsentEvent.Scope.RAW_AUDIO_RETENTION
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class PipelineError(Exception):
    """A request the pipeline refuses (an action in the wrong state); the message says why."""


def _note(recording: Recording, message: str, level: str = "info") -> None:
    RecordingLog.objects.create(study=recording.study, recording=recording, level=level, message=message)


def _snapshot(recording: Recording) -> dict[str, Any]:
    return {"state": recording.state, "reason": recording.reason, "audio": recording.audio,
            "content_sha256": recording.content_sha256,
            "headset": str(recording.headset) if recording.headset_id else None,
            "demonstrator": str(recording.demonstrator) if recording.demonstrator_id else None}


def _set_state(actor, recording: Recording, state: str, *, reason: str = "", action: str,
               note: str | None = None, **fields) -> None:
    before = _snapshot(recording)
    recording.state = state
    recording.reason = reason
    for name, value in fields.items():
        setattr(recording, name, value)
    recording.save()
    record(actor, action, recording, before=before, after=_snapshot(recording))
    if note or reason:
        _note(recording, note or reason, "warning" if state in (Recording.State.QUARANTINED,
                                                                Recording.State.REJECTED,
                                                                Recording.State.FAILED) else "info")


def _enqueue_export(recording: Recording) -> None:
    from portal.recordings.tasks import export_recording

    transaction.on_commit(lambda: export_recording.delay(recording.pk))


# --- ingest ---------------------------------------------------------------------------------------------


def _safe_name(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    return _SAFE_NAME.sub("_", base).strip("._")[:200] or "capture-source"


@transaction.atomic
def receive_upload(actor, study: Study, upload, *, name: str, via: str) -> Recording:
    """Stream an uploaded capture source (folder archives only: a ZIP) into storage; ingest runs in a task."""
    recording = Recording(study=study, via=via, original_name=_safe_name(name), created_by=actor)
    recording.incoming_name = storage.put(storage.captures(), f"{recording.prefix}incoming/{recording.original_name}",
                                          upload)
    recording.save()
    record(actor, "recording.received", recording, after={"via": via, "name": recording.original_name})
    from portal.recordings.tasks import ingest_recording

    transaction.on_commit(lambda: ingest_recording.delay(recording.pk))
    return recording


def ingest_received(recording: Recording) -> Recording:
    """Task body: ingest an upload waiting in storage. Idempotent: only a ``received`` recording is processed
    (a delivery after a crash between ingest and clean-up only removes the upload)."""
    if recording.state == Recording.State.RECEIVED:
        _ingest_upload(recording)
    if recording.incoming_name:
        storage.captures().delete(recording.incoming_name)
        Recording.objects.filter(pk=recording.pk).update(incoming_name="")
        recording.incoming_name = ""
    return recording


def _ingest_upload(recording: Recording) -> None:
    with tempfile.TemporaryDirectory(prefix="ceres-ingest-") as scratch:
        local = Path(scratch) / recording.original_name
        try:
            storage.fetch(storage.captures(), recording.incoming_name, local, max_bytes=settings.CERES_MAX_SOURCE_BYTES)
        except ValueError as exc:
            with transaction.atomic():
                _set_state(recording.created_by, recording, Recording.State.REJECTED, reason=str(exc),
                           action="recording.rejected")
            return
        _ingest_local(recording.created_by, recording, local)


def ingest_path(actor, study: Study, source: Path, *, via: str = "command") -> Recording:
    """Ingest a local capture source folder or ZIP (the command line and the inbox folder)."""
    with transaction.atomic():
        recording = Recording.objects.create(study=study, via=via, original_name=_safe_name(source.name),
                                             created_by=actor)
        record(actor, "recording.received", recording, after={"via": via, "name": recording.original_name})
    return _ingest_local(actor, recording, Path(source))


def _ingest_local(actor, recording: Recording, source: Path) -> Recording:
    with tempfile.TemporaryDirectory(prefix="ceres-ingest-") as scratch:
        try:
            root = unpack_source(source, Path(scratch) / "source", max_bytes=settings.CERES_MAX_SOURCE_BYTES,
                                 max_entries=settings.CERES_MAX_SOURCE_ENTRIES)
            capture = read_capture(root)
        except SourceError as exc:
            with transaction.atomic():
                _set_state(actor, recording, Recording.State.REJECTED, reason=f"invalid capture source: {exc}",
                           action="recording.rejected")
            return recording
        digest = content_digest(root)
        if _claim_digest(actor, recording, digest):
            return recording
        _describe(recording, capture)
        check = check_registry(recording)
        try:
            _store_source(actor, recording, capture, root, Path(scratch), keep_audio=_keeps_audio(recording, check))
        except SourceError as exc:
            storage.delete_prefix(storage.captures(), recording.prefix + "source/")
            storage.delete_prefix(storage.captures(), recording.prefix + "audio/")
            with transaction.atomic():
                _set_state(actor, recording, Recording.State.REJECTED, reason=f"invalid media: {exc}",
                           action="recording.rejected")
            return recording
        with transaction.atomic():
            if check.problems:
                _set_state(actor, recording, Recording.State.QUARANTINED, reason="; ".join(check.problems),
                           action="recording.quarantined", **check.assignment())
            else:
                _set_state(actor, recording, Recording.State.QUEUED, action="recording.accepted",
                           note="accepted; export queued", **check.assignment())
                _enqueue_export(recording)
    return recording


def _claim_digest(actor, recording: Recording, digest: str) -> bool:
    """Record the content digest; True (and the recording marked duplicate) when the study already has it."""
    existing = Recording.objects.filter(content_sha256=digest, duplicate_of__isnull=True).exclude(pk=recording.pk)
    original = existing.first()
    if original is None:
        try:
            with transaction.atomic():
                Recording.objects.filter(pk=recording.pk).update(content_sha256=digest)
                recording.content_sha256 = digest
                return False
        except IntegrityError:  # a concurrent ingest of the same content won the race
            recording.content_sha256 = ""
            original = existing.get()
    with transaction.atomic():
        _set_state(actor, recording, Recording.State.DUPLICATE, action="recording.duplicate",
                   reason=f"the same capture source was already ingested as recording {original.uid}",
                   content_sha256=digest, duplicate_of=original)
    return True


def _describe(recording: Recording, capture: Capture) -> None:
    retained = [s for s in capture.journal.segments if s.retained]
    recording.capture_id = capture.capture_id
    recording.recorded_at = datetime.fromisoformat(capture.recorded_at.replace("Z", "+00:00"))
    recording.claims = capture.study_claims
    recording.summary = {
        "rate_hz": capture.rate_hz,
        "rows": sum(s.end_slot - s.start_slot for s in retained),
        "segments": len(retained),
        "dropped_retries": len(capture.journal.segments) - len(retained),
        "tasks": list(dict.fromkeys(s.task for s in retained)),
        "camera": (None if capture.camera is None else
                   {"selected": capture.camera.selected, "width": capture.camera_probe.width,
                    "height": capture.camera_probe.height, "frames": capture.camera_probe.frame_count}),
        "audio_in_source": capture.audio_in_source,
        "warnings": capture.warnings,
    }
    recording.save()


@dataclass
class RegistryCheck:
    """What the registry says of a recording's claims; computing it writes nothing."""

    problems: list[str]
    headset: Headset | None = None
    demonstrator: Demonstrator | None = None
    audio_consent: bool = False

    def assignment(self) -> dict[str, Any]:
        """The registry entries found, as fields for the recording's next state change."""
        return {"headset": self.headset, "demonstrator": self.demonstrator}


def check_registry(recording: Recording) -> RegistryCheck:
    """Check the recording's claims against the registry (every problem is listed, not just the first).

    A demonstrator a coordinator registered for this recording (``register_demonstrator``) stands for
    the claimed designator.
    """
    study = recording.study
    claims = recording.claims
    on: date = recording.recorded_on
    check = RegistryCheck(problems=[])
    problems = check.problems
    if study.status != Study.Status.ACTIVE:
        problems.append(f"study {study.code} is {study.status}, not active: it accepts no recordings")
    if claims.get("project_id") and study.project_id and claims["project_id"] != study.project_id:
        problems.append(f"capture.json claims project {claims['project_id']!r}, "
                        f"but study {study.code} is project {study.project_id!r}")
    if not claims.get("headset_id"):
        problems.append("capture.json has no study.headset_id")
    else:
        try:
            check.headset = registry.headset_for_recording(study, claims["headset_id"], on)
        except registry.RegistryError as exc:
            problems.append(str(exc))
    check.demonstrator = recording.demonstrator
    if check.demonstrator is None:
        try:
            check.demonstrator = registry.registered_demonstrator(study, claims.get("demonstrator_id") or "")
        except registry.RegistryError as exc:
            problems.append(str(exc))
    if check.demonstrator is not None:
        release = registry.consent_coverage(check.demonstrator, on, RELEASE)
        if not release.covered:
            problems.append(f"demonstrator {check.demonstrator.designator}: {release.reason}")
        check.audio_consent = registry.is_covered(check.demonstrator, on, AUDIO_RETENTION)
    return check


def _keeps_audio(recording: Recording, check: RegistryCheck) -> bool:
    """Keep (encrypted) when the policy is not ``discard`` and consent allows it or is still being sorted out."""
    if recording.study.audio_policy == Study.AudioPolicy.DISCARD:
        return False
    return check.audio_consent or bool(check.problems)


def _store_source(actor, recording: Recording, capture: Capture, root: Path, scratch: Path, *,
                  keep_audio: bool) -> None:
    """Store the silent source, and the raw-audio files encrypted when they are kept."""
    manifest = json.loads((root / "capture.json").read_bytes())
    audio_media = (manifest.get("audio") or {}).get("media")
    carriers = []
    if capture.camera is not None and capture.camera_probe.has_audio:
        carriers.append(capture.camera.media)
    if audio_media and audio_media not in carriers:
        carriers.append(audio_media)
    captures = storage.captures()
    kept = []
    if carriers and keep_audio:
        key = audio.new_key()
        for name in carriers:
            sealed = scratch / "sealed.enc"
            plain_sha, plain_bytes = storage.file_digest(root / name)
            audio.encrypt_file(key, root / name, sealed, associated=f"{recording.uid}/{name}".encode())
            target = storage.put(captures, f"{recording.prefix}audio/{name}.enc", sealed)
            kept.append({"path": target, "source": name, "plain_sha256": plain_sha, "plain_bytes": plain_bytes})
        AudioKey.objects.update_or_create(recording=recording, defaults={"study": recording.study,
                                                                         "wrapped_key": audio.wrap_key(key)})
    if carriers:
        if capture.camera is not None and capture.camera.media in carriers:
            silent = scratch / "silent-camera"
            strip_audio(root / capture.camera.media, silent)
            silent.replace(root / capture.camera.media)
        if audio_media and audio_media != (capture.camera.media if capture.camera else None):
            (root / audio_media).unlink()
        # The stored source is silent by construction: its manifest names no microphone media.
        if manifest.get("audio"):
            manifest["audio"]["media"] = None
        (root / "capture.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        read_capture(root)  # the silent source must still be a valid one
    files = []
    for path in source_files(root):
        name = path.relative_to(root).as_posix()
        sha, size = storage.file_digest(path)
        files.append({"path": storage.put(captures, f"{recording.prefix}source/{name}", path), "name": name,
                      "sha256": sha, "bytes": size})
    state = Recording.Audio.ENCRYPTED if kept else Recording.Audio.STRIPPED if carriers else Recording.Audio.NONE
    recording.source_files = files
    recording.audio = state
    recording.audio_objects = kept
    recording.save(update_fields=["source_files", "audio", "audio_objects", "updated_at"])
    if carriers:
        rule = "kept encrypted" if kept else _strip_rule(recording)
        record(actor, f"recording.audio_{state}", recording, after={"files": carriers, "rule": rule})
        _note(recording, f"raw audio in {', '.join(carriers)}: {rule}")


def _strip_rule(recording: Recording) -> str:
    if recording.study.audio_policy == Study.AudioPolicy.DISCARD:
        return "stripped at ingest (study policy discard)"
    return "stripped at ingest (consent does not cover raw-audio retention)"


def recheck(actor, recording: Recording) -> Recording:
    """Check a quarantined recording against the registry again (after the registry was fixed)."""
    with transaction.atomic():
        _lock_fresh(recording)
        if recording.state != Recording.State.QUARANTINED:
            raise PipelineError(f"only a quarantined recording can be re-checked; this one is {recording.state}")
        check = check_registry(recording)
        if check.problems:
            _set_state(actor, recording, Recording.State.QUARANTINED, reason="; ".join(check.problems),
                       action="recording.rechecked", note="re-checked: still quarantined", **check.assignment())
            return recording
        _set_state(actor, recording, Recording.State.QUEUED, action="recording.accepted",
                   note="re-checked: accepted; export queued", **check.assignment())
        _enqueue_export(recording)
    if recording.audio == Recording.Audio.ENCRYPTED and not _keeps_audio(recording, check):
        purge_audio(actor, recording, rule="consent does not cover raw-audio retention")
    return recording


def register_demonstrator(actor, recording: Recording) -> Demonstrator:
    """A coordinator's explicit action on a quarantined recording whose demonstrator is not registered:
    register the designator it claims (or, when it claims none, a generated one with its headset's family
    pair) and tie it to the recording. Consent still has to be recorded before a re-check accepts it."""
    with transaction.atomic():
        _lock_fresh(recording)
        if recording.state != Recording.State.QUARANTINED:
            raise PipelineError(f"only a quarantined recording needs a demonstrator registered; this one is "
                                f"{recording.state}")
        if recording.demonstrator is not None:
            raise PipelineError(f"this recording already has demonstrator {recording.demonstrator}")
        claimed_headset = recording.claims.get("headset_id")
        if claimed_headset and recording.headset is None:
            raise PipelineError(f"register headset {claimed_headset!r} and re-check first: the designator's family "
                                f"pair comes from the headset")
        claimed = registry.normalise_designator(recording.claims.get("demonstrator_id") or "")
        try:
            demonstrator = registry.create_demonstrator(actor, recording.study, designator=claimed,
                                                        headset=recording.headset)
        except registry.RegistryError as exc:
            raise PipelineError(str(exc)) from None
        _set_state(actor, recording, recording.state, reason=recording.reason,
                   action="recording.demonstrator_registered", demonstrator=demonstrator,
                   note=f"demonstrator {demonstrator} registered for this recording; record their consent, "
                        f"then re-check")
    return demonstrator


def _lock_fresh(recording: Recording) -> None:
    """Lock the recording's row and reload it, so a state check holds until the transaction ends
    (two clicks, or the page and the API at once, act once)."""
    Recording.objects.select_for_update(of=("self",)).only("pk").get(pk=recording.pk)
    recording.refresh_from_db()


def retry_export(actor, recording: Recording) -> Recording:
    with transaction.atomic():
        _lock_fresh(recording)
        if recording.state != Recording.State.FAILED:
            raise PipelineError(f"only a failed export can be retried; this one is {recording.state}")
        _set_state(actor, recording, Recording.State.QUEUED, action="recording.export_retried",
                   note="export queued again", progress=0, progress_note="")
        _enqueue_export(recording)
    return recording


# --- export -------------------------------------------------------------------------------------------


class ExportBusy(Exception):
    """Another attempt holds the export lease; try again once it has run out."""

    def __init__(self, seconds_left: float):
        super().__init__(f"another export attempt holds the lease for {seconds_left:.0f} s more")
        self.seconds_left = seconds_left


def claim_export(recording_id: int) -> Recording | None:
    """Take the export lease; None when there is nothing to do. A live lease of another attempt (or of a
    worker that was killed) raises ``ExportBusy``: the caller retries after it runs out."""
    with transaction.atomic():
        recording = Recording.objects.select_for_update(of=("self",)).select_related("study").get(pk=recording_id)
        now = timezone.now()
        live_lease = recording.lease_until is not None and recording.lease_until > now
        if recording.state == Recording.State.RUNNING and live_lease:
            raise ExportBusy((recording.lease_until - now).total_seconds())
        if recording.state not in (Recording.State.QUEUED, Recording.State.RUNNING):
            return None
        _set_state(None, recording, Recording.State.RUNNING, action="recording.export_started",
                   note="export started", progress=5, progress_note="allocating the episode",
                   lease_until=now + timedelta(seconds=settings.CERES_EXPORT_LEASE_SECONDS))
        return recording


def _progress(recording: Recording, percent: int, note: str) -> None:
    lease = timezone.now() + timedelta(seconds=settings.CERES_EXPORT_LEASE_SECONDS)
    Recording.objects.filter(pk=recording.pk).update(progress=percent, progress_note=note, lease_until=lease)


@transaction.atomic
def allocate_episode(recording: Recording) -> Episode:
    """The recording's episode index and global frame range; the same allocation on every retry.

    The study dataset row is locked (``select_for_update``) while the counters advance and the task
    texts are appended, so concurrent exports of one study never collide.
    """
    existing = Episode.objects.filter(recording=recording).first()
    if existing is not None:
        return existing
    dataset, _ = StudyDataset.objects.select_for_update().get_or_create(study=recording.study)
    existing = Episode.objects.filter(recording=recording).first()  # allocated while we waited for the lock
    if existing is not None:
        return existing
    length = recording.summary["rows"]
    dataset.tasks = extend_tasks(dataset.tasks, recording.summary["tasks"])
    episode = Episode.objects.create(study=recording.study, recording=recording,
                                     episode_index=dataset.next_episode_index, from_index=dataset.next_frame_index,
                                     length=length, task_count=len(dataset.tasks))
    dataset.next_episode_index += 1
    dataset.next_frame_index += length
    dataset.save()
    record(None, "episode.allocated", episode, after={"episode_index": episode.episode_index,
                                                      "from_index": episode.from_index, "length": length,
                                                      "task_count": episode.task_count})
    return episode


def _study_block(recording: Recording) -> dict[str, Any]:
    coverage = registry.consent_coverage(recording.demonstrator, recording.recorded_on, RELEASE)
    return {
        "headset_id": recording.headset.headset_id if recording.headset else None,
        "demonstrator_id": recording.demonstrator.designator if recording.demonstrator else None,
        "project_id": recording.study.project_id or None,
        "consent_date": coverage.event.event_date.isoformat() if coverage.event else None,
        "consent_document_id": (f"{coverage.document.identifier} v{coverage.document.version}"
                                if coverage.document else None),
        "raw_audio_retained": recording.audio == Recording.Audio.ENCRYPTED
        and recording.study.audio_policy != Study.AudioPolicy.UNTIL_EXPORT,
    }


def export_recording(recording_id: int) -> Recording | None:
    """Export one recording into its episode shard in the ``shards`` storage.

    Idempotent: an exported recording is left alone, a retried one reuses its allocation and replaces
    whatever an interrupted attempt left under its shard prefix. ``SourceError`` fails the recording;
    storage errors propagate so the task can retry (the recording stays ``running`` until its lease ends).
    """
    recording = claim_export(recording_id)
    if recording is None:
        return None
    try:
        episode = allocate_episode(recording)
        with transaction.atomic():
            dataset = StudyDataset.objects.get(study=recording.study)
            tasks = dataset.tasks[: episode.task_count]
        with tempfile.TemporaryDirectory(prefix="ceres-export-") as scratch:
            source = Path(scratch) / "source"
            _progress(recording, 15, f"fetching the source for {episode.folder}")
            for item in recording.source_files:
                storage.fetch(storage.captures(), item["path"], source / item["name"])
            _progress(recording, 30, f"exporting {episode.folder}")
            result = export_shard(source, Path(scratch) / "out", episode_index=episode.episode_index,
                                  from_index=episode.from_index, tasks=tasks, study=_study_block(recording))
            if result.rows != episode.length:
                raise SourceError(f"exported {result.rows} rows but {episode.length} were allocated")
            _progress(recording, 60, f"uploading {episode.folder}")
            artefacts = _publish_shard(recording, episode, result.shard_dir)
    except SourceError as exc:
        fail_export(recording, f"export failed: {exc}")
        return recording
    with transaction.atomic():
        episode.exported_at = timezone.now()
        episode.shard_files = artefacts
        episode.receipt_sha256 = result.receipt_sha256
        episode.video_method = result.video_method or ""
        episode.raw_audio_retained = _study_block(recording)["raw_audio_retained"]
        episode.save()
        recording.refresh_from_db()
        _set_state(None, recording, Recording.State.EXPORTED, action="recording.exported",
                   note=f"exported as {episode.folder}: {result.rows} rows, video {result.video_method or 'none'}",
                   progress=100, progress_note="exported", lease_until=None)
        from portal.recordings.tasks import verify_episode

        transaction.on_commit(lambda: verify_episode.delay(episode.pk))
    if recording.audio == Recording.Audio.ENCRYPTED and recording.study.audio_policy == Study.AudioPolicy.UNTIL_EXPORT:
        purge_audio(None, recording, rule="until-export")
    return recording


def _publish_shard(recording: Recording, episode: Episode, shard_dir: Path) -> list[dict[str, Any]]:
    """Upload a local shard to its final keys, receipt last, each object re-hashed from the storage."""
    shards = storage.shards()
    removed = storage.delete_prefix(shards, episode.prefix)
    if removed:
        _note(recording, f"removed {removed} objects left by an interrupted attempt under {episode.prefix}",
              "warning")
    receipt = json.loads((shard_dir / RECEIPT).read_bytes())
    artefacts = receipt["artefacts"]
    for number, artefact in enumerate([*artefacts, {"path": RECEIPT}], start=1):
        local = shard_dir / artefact["path"]
        name = storage.put(shards, episode.prefix + artefact["path"], local)
        expected = storage.file_digest(local)
        if storage.digest(shards, name) != expected:
            raise OSError(f"{name}: stored object does not match the uploaded file")
        _progress(recording, 60 + 35 * number // (len(artefacts) + 1), f"uploaded {artefact['path']}")
    return artefacts


def fail_ingest(recording: Recording, reason: str) -> None:
    with transaction.atomic():
        recording.refresh_from_db()
        if recording.state == Recording.State.RECEIVED:
            _set_state(None, recording, Recording.State.REJECTED, reason=reason, action="recording.rejected")


def fail_export(recording: Recording, reason: str) -> None:
    with transaction.atomic():
        recording.refresh_from_db()
        _set_state(None, recording, Recording.State.FAILED, reason=reason, action="recording.export_failed",
                   lease_until=None)


def note_retry(recording_id: int, exc: BaseException, countdown: float) -> None:
    """A transient error: the export goes back to the queue and the task retries it."""
    with transaction.atomic():
        recording = Recording.objects.select_for_update().get(pk=recording_id)
        if recording.state == Recording.State.RUNNING:
            _set_state(None, recording, Recording.State.QUEUED, action="recording.export_requeued", lease_until=None,
                       progress_note=f"retrying in {countdown:.0f} s after a storage error")
        _note(recording, f"storage error, retrying in {countdown:.0f} s: {exc}", "warning")


# --- verification ---------------------------------------------------------------------------------------


def verify_episode(episode: Episode) -> Verification:
    """Re-hash a stored shard (streamed from storage) against its receipt; a mismatch raises an alert."""
    shards = storage.shards()
    problems = []
    receipt_name = episode.prefix + RECEIPT
    receipt_sha, artefacts = None, {}
    try:
        receipt_sha, _ = storage.digest(shards, receipt_name)
        with shards.open(receipt_name, "rb") as stream:
            artefacts = {a["path"]: a for a in json.loads(stream.read())["artefacts"]}
    except FileNotFoundError:
        problems.append(f"{RECEIPT}: missing")
    except (ValueError, KeyError, TypeError) as exc:
        problems.append(f"{RECEIPT}: unreadable ({exc!r})")
    if receipt_sha is not None and receipt_sha != episode.receipt_sha256:
        problems.append(f"{RECEIPT}: SHA-256 {receipt_sha} differs from the one recorded at export")
    present = {name[len(episode.prefix):] for name in storage.walk(shards, episode.prefix)} - {RECEIPT}
    for name in sorted(present - artefacts.keys()):
        problems.append(f"{name}: extra object not in the receipt")
    for name, artefact in sorted(artefacts.items()):
        if name not in present:
            problems.append(f"{name}: missing")
            continue
        sha, size = storage.digest(shards, episode.prefix + name)
        if size != artefact["bytes"]:
            problems.append(f"{name}: {size} bytes, receipt says {artefact['bytes']}")
        if sha != artefact["sha256"]:
            problems.append(f"{name}: SHA-256 {sha} does not match the receipt")
    with transaction.atomic():
        now = timezone.now()
        result = Verification.objects.create(study=episode.study, episode=episode, checked_at=now,
                                             ok=not problems, problems=problems)
        before = episode.receipt_status
        episode.receipt_status = Episode.Receipt.MISMATCH if problems else Episode.Receipt.VERIFIED
        episode.verified_at = now
        episode.save(update_fields=["receipt_status", "verified_at"])
        record(None, "episode.verified" if not problems else "episode.verification_failed", episode,
               before={"receipt_status": before}, after={"receipt_status": episode.receipt_status,
                                                         "problems": problems})
        recording = Recording.objects.select_for_update().get(pk=episode.recording_id)
        if problems:
            Alert.objects.create(study=episode.study, episode=episode,
                                 message=f"{episode.prefix}: shard does not match its receipt: "
                                         + "; ".join(problems[:5]))
            _note(recording, f"verification failed: {'; '.join(problems[:5])}", "error")
        elif recording.state == Recording.State.EXPORTED:
            _set_state(None, recording, Recording.State.VERIFIED, action="recording.verified",
                       note=f"{episode.folder} verified against its receipt")
    return result


def reverify_all() -> int:
    """Queue a re-verification of every exported shard (the fixity schedule)."""
    from portal.recordings.tasks import verify_episode

    with scopes_disabled():
        ids = list(Episode.objects.filter(exported_at__isnull=False).values_list("pk", flat=True))
    for pk in ids:
        verify_episode.delay(pk)
    return len(ids)


# --- audio retention ------------------------------------------------------------------------------------


def purge_audio(actor, recording: Recording, *, rule: str) -> PurgeReceipt | None:
    """Delete a recording's kept raw audio and destroy its key, leaving a purge receipt."""
    with transaction.atomic():
        recording = Recording.objects.select_for_update(of=("self",)).select_related("study").get(pk=recording.pk)
        if recording.audio != Recording.Audio.ENCRYPTED:
            return None
        captures = storage.captures()
        purged = []
        for item in recording.audio_objects:
            try:
                sha, size = storage.digest(captures, item["path"])
            except FileNotFoundError:
                sha, size = None, 0
            purged.append({"path": item["path"], "source": item["source"], "sha256": sha, "bytes": size,
                           "plain_sha256": item["plain_sha256"]})
        deleted, _ = AudioKey.objects.filter(recording=recording).delete()
        receipt = PurgeReceipt.objects.create(study=recording.study, recording=recording, rule=rule,
                                              purged_at=timezone.now(), objects_purged=purged,
                                              key_destroyed=bool(deleted))
        before = _snapshot(recording)
        recording.audio = Recording.Audio.PURGED
        recording.audio_objects = []
        recording.save(update_fields=["audio", "audio_objects", "updated_at"])
        record(actor, "recording.audio_purged", recording, before=before,
               after={**_snapshot(recording), "rule": rule, "objects": purged})
        _note(recording, f"raw audio purged ({rule}); key destroyed")
        # Objects go last: if deleting fails the transaction rolls back and the key is still there to retry.
        for item in purged:
            captures.delete(item["path"])
    return receipt


def purge_due_audio(now: datetime | None = None) -> int:
    """Purge kept audio whose time has come: ``until-export`` after export, ``retain-days N`` N days after
    recording, and any audio the study's policy or the demonstrator's consent no longer allows."""
    now = now or datetime.now(UTC)
    count = 0
    with scopes_disabled():
        candidates = list(Recording.objects.filter(audio=Recording.Audio.ENCRYPTED).select_related("study"))
    for recording in candidates:
        with scope(study=recording.study):
            rule = _purge_rule(recording, now)
            if rule and purge_audio(None, recording, rule=rule):
                count += 1
    return count


def _purge_rule(recording: Recording, now: datetime) -> str | None:
    study = recording.study
    policy = study.audio_policy
    if policy == Study.AudioPolicy.DISCARD:
        return "discard"
    if policy == Study.AudioPolicy.UNTIL_EXPORT and recording.state in (Recording.State.EXPORTED,
                                                                        Recording.State.VERIFIED):
        return "until-export"
    days = study.audio_retain_days
    if policy == Study.AudioPolicy.RETAIN_DAYS and recording.recorded_at + timedelta(days=days) <= now:
        return f"retain-days {days}"
    if (recording.state != Recording.State.QUARANTINED and recording.demonstrator is not None
            and not registry.is_covered(recording.demonstrator, recording.recorded_on, AUDIO_RETENTION)):
        return "consent does not cover raw-audio retention"
    return None


def purge_for_withdrawal(demonstrator: Demonstrator) -> int:
    """Consent withdrawn: the demonstrator's kept raw audio goes at once."""
    count = 0
    for recording in Recording.objects.filter(demonstrator=demonstrator, audio=Recording.Audio.ENCRYPTED):
        if purge_audio(None, recording, rule="consent withdrawn"):
            count += 1
    return count


# --- inbox ----------------------------------------------------------------------------------------------


def poll_inbox(min_age_seconds: float = 30.0) -> list[Recording]:
    """Ingest what waits in the inbox: ``<inbox>/<study code>/<folder or .zip>`` on disk, or with S3 storage
    the objects ``inbox/<study code>/<name>.zip`` in the captures bucket. Entries younger than
    ``min_age_seconds`` are left for the next poll (a copy may still be running)."""
    if settings.STORAGE_BACKEND == "s3":
        return _poll_bucket_inbox()
    return _poll_folder_inbox(Path(settings.CERES_INBOX_DIR), min_age_seconds)


def _inbox_study(code: str) -> Study | None:
    return Study.objects.filter(code=code).first()


def _poll_folder_inbox(inbox: Path, min_age_seconds: float) -> list[Recording]:
    ingested = []
    if not inbox.is_dir():
        return ingested
    now = datetime.now(UTC).timestamp()
    for study_dir in sorted(p for p in inbox.iterdir() if p.is_dir() and not p.is_symlink()):
        study = _inbox_study(study_dir.name)
        if study is None:
            log.warning("inbox folder %s names no study", study_dir)
            continue
        claimed = study_dir / ".processing"
        claimed.mkdir(exist_ok=True)
        for entry in sorted(study_dir.iterdir()):
            if entry.name.startswith(".") or now - entry.lstat().st_mtime < min_age_seconds:
                continue
            target = claimed / entry.name
            try:
                entry.rename(target)  # atomic: of two pollers, one wins
            except FileNotFoundError:
                continue
            with scope(study=study):
                ingested.append(ingest_path(None, study, target, via="inbox"))
            _remove(target)
    return ingested


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # removes links inside without following them
    else:
        path.unlink()


def _poll_bucket_inbox() -> list[Recording]:
    captures = storage.captures()
    ingested = []
    try:
        codes, _ = captures.listdir("inbox")
    except FileNotFoundError:
        return ingested
    for code in codes:
        study = _inbox_study(code)
        if study is None:
            continue
        for name in storage.walk(captures, f"inbox/{code}/"):
            with tempfile.TemporaryDirectory(prefix="ceres-inbox-") as scratch, scope(study=study):
                local = Path(scratch) / _safe_name(name)
                try:
                    storage.fetch(captures, name, local, max_bytes=settings.CERES_MAX_SOURCE_BYTES)
                except ValueError as exc:
                    captures.delete(name)
                    ingested.append(_reject_unread(study, local.name, str(exc)))
                    continue
                captures.delete(name)
                ingested.append(ingest_path(None, study, local, via="inbox"))
    return ingested


@transaction.atomic
def _reject_unread(study: Study, name: str, reason: str) -> Recording:
    recording = Recording.objects.create(study=study, via="inbox", original_name=name)
    _set_state(None, recording, Recording.State.REJECTED, reason=reason, action="recording.rejected")
    return recording
