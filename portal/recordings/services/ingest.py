"""Ingest: take a capture source in (upload, API, command, inbox), validate it with the exporter, recognise a
duplicate, check its claims against the registry, decide its raw audio, store it silent, and quarantine or
accept it (queueing its export). Also the quarantine's way out: register a demonstrator, re-check."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from exporter.errors import SourceError
from exporter.receipt import file_digest
from exporter.source import Capture, make_silent, read_capture, source_digest, unpack_source
from portal.audit.services import record
from portal.core import queue, storage
from portal.recordings.exceptions import PipelineError
from portal.recordings.models import Recording
from portal.recordings.services import audio
from portal.recordings.services.history import lock_in_state, set_state
from portal.studies.exceptions import RegistryError
from portal.studies.models import ConsentEvent, Demonstrator, Headset, Study
from portal.studies.services.consent import consent_coverage, is_covered
from portal.studies.services.demonstrators import create_demonstrator, normalise_designator, registered_demonstrator
from portal.studies.services.headsets import headset_for_recording

State = Recording.State
EPISODE_RELEASE = ConsentEvent.Scope.EPISODE_RELEASE
AUDIO_RETENTION = ConsentEvent.Scope.RAW_AUDIO_RETENTION
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """A file name fit for a storage key: the last path part, unusual characters replaced."""
    base = Path(name.replace("\\", "/")).name
    return _SAFE_NAME.sub("_", base).strip("._")[:200] or "capture-source"


@transaction.atomic
def receive_upload(actor, study: Study, upload, *, name: str, via: str) -> Recording:
    """Stream an uploaded capture source (folder archives only: a ZIP) into storage; ingest runs in a task."""
    recording = Recording(study=study, via=via, original_name=safe_name(name), created_by=actor)
    recording.incoming_name = storage.put(storage.captures(), f"{recording.prefix}incoming/{recording.original_name}",
                                          upload)
    recording.save()
    record(actor, "recording.received", recording, after={"via": via, "name": recording.original_name})
    queue.enqueue("recordings.ingest_recording", recording.pk)
    return recording


def ingest_received(recording: Recording) -> Recording:
    """Task body: ingest an upload waiting in storage. Idempotent: only a ``received`` recording is processed
    (a delivery after a crash between ingest and clean-up only removes the upload)."""
    if recording.state == State.RECEIVED:
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
            reject(recording.created_by, recording, str(exc))
            return
        _ingest_local(recording.created_by, recording, local)


def ingest_path(actor, study: Study, source: Path, *, via: str = "command") -> Recording:
    """Ingest a local capture source folder or ZIP (the command line and the inbox folder)."""
    with transaction.atomic():
        recording = Recording.objects.create(study=study, via=via, original_name=safe_name(source.name),
                                             created_by=actor)
        record(actor, "recording.received", recording, after={"via": via, "name": recording.original_name})
    return _ingest_local(actor, recording, Path(source))


def reject(actor, recording: Recording, reason: str) -> Recording:
    """A source that cannot be ingested: nothing of it is kept, the reason is shown."""
    with transaction.atomic():
        set_state(actor, recording, State.REJECTED, reason=reason, action="recording.rejected")
    return recording


def fail_ingest(recording: Recording, reason: str) -> None:
    """The ingest task gave up on a received upload (an error it could not recover from)."""
    with transaction.atomic():
        recording.refresh_from_db()
        if recording.state == State.RECEIVED:
            set_state(None, recording, State.REJECTED, reason=reason, action="recording.rejected")


def _ingest_local(actor, recording: Recording, source: Path) -> Recording:
    with tempfile.TemporaryDirectory(prefix="ceres-ingest-") as scratch:
        try:
            root = unpack_source(source, Path(scratch) / "source", max_bytes=settings.CERES_MAX_SOURCE_BYTES,
                                 max_entries=settings.CERES_MAX_SOURCE_ENTRIES,
                                 max_ratio=settings.CERES_MAX_SOURCE_EXPANSION)
            capture = read_capture(root)
        except SourceError as exc:
            return reject(actor, recording, f"invalid capture source: {exc}")
        if _claim_digest(actor, recording, source_digest(root)):
            return recording
        _describe(recording, capture)
        check = check_registry(recording)
        keep = audio.keeps_audio(recording.study, consent=check.audio_consent, quarantined=bool(check.problems))
        try:
            _store_source(actor, recording, capture, root, Path(scratch), keep_audio=keep)
        except SourceError as exc:
            storage.delete_prefix(storage.captures(), recording.prefix + "source/")
            storage.delete_prefix(storage.captures(), recording.prefix + "audio/")
            return reject(actor, recording, f"invalid media: {exc}")
        with transaction.atomic():
            if check.problems:
                set_state(actor, recording, State.QUARANTINED, reason="; ".join(check.problems),
                          action="recording.quarantined", **check.assignment())
            else:
                set_state(actor, recording, State.QUEUED, action="recording.accepted",
                          note_text="accepted; export queued", **check.assignment())
                queue.enqueue("recordings.export_recording", recording.pk)
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
        set_state(actor, recording, State.DUPLICATE, action="recording.duplicate",
                  reason=f"the same capture source was already ingested as recording {original.uid}",
                  content_sha256=digest, duplicate_of=original)
    return True


def _describe(recording: Recording, capture: Capture) -> None:
    """What the page and the export allocation show of the source, as the exporter read it."""
    recording.capture_id = capture.capture_id
    recording.recorded_at = datetime.fromisoformat(capture.recorded_at.replace("Z", "+00:00"))
    recording.claims = capture.study_claims
    probe = capture.camera_probe
    recording.summary = {
        "rate_hz": capture.rate_hz,
        "rows": capture.row_count,
        "segments": len(capture.retained_segments),
        "dropped_retries": capture.dropped_retries,
        "tasks": capture.tasks,
        "outcomes": sorted({segment.outcome for segment in capture.retained_segments}),
        "camera": (None if capture.camera is None else
                   {"selected": capture.camera.selected, "width": probe.width, "height": probe.height,
                    "frames": probe.frame_count}),
        "audio_in_source": capture.audio_in_source,
        "warnings": capture.warnings,
    }
    recording.save()


def _store_source(actor, recording: Recording, capture: Capture, root: Path, scratch: Path, *,
                  keep_audio: bool) -> None:
    """Store the silent source, and the raw-audio files encrypted when they are kept."""
    audio_files = capture.audio_files
    kept = audio.seal(recording, root, audio_files, scratch) if audio_files and keep_audio else []
    make_silent(root, capture)
    captures = storage.captures()
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix()
        sha, size = file_digest(path)
        files.append({"path": storage.put(captures, f"{recording.prefix}source/{name}", path), "name": name,
                      "sha256": sha, "bytes": size})
    recording.source_files = files
    recording.audio = (Recording.Audio.ENCRYPTED if kept else Recording.Audio.STRIPPED if audio_files
                       else Recording.Audio.NONE)
    recording.audio_objects = kept
    recording.save(update_fields=["source_files", "audio", "audio_objects", "updated_at"])
    if audio_files:
        audio.record_decision(actor, recording, audio_files)


# --- the registry check and the quarantine's way out ------------------------------------------------------


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
            check.headset = headset_for_recording(study, claims["headset_id"], on)
        except RegistryError as exc:
            problems.append(str(exc))
    check.demonstrator = recording.demonstrator
    if check.demonstrator is None:
        try:
            check.demonstrator = registered_demonstrator(study, claims.get("demonstrator_id") or "")
        except RegistryError as exc:
            problems.append(str(exc))
    if check.demonstrator is not None:
        release = consent_coverage(check.demonstrator, on, EPISODE_RELEASE)
        if not release.covered:
            problems.append(f"demonstrator {check.demonstrator.designator}: {release.reason}")
        check.audio_consent = is_covered(check.demonstrator, on, AUDIO_RETENTION)
    return check


def recheck(actor, recording: Recording) -> Recording:
    """Check a quarantined recording against the registry again (after the registry was fixed)."""
    with transaction.atomic():
        lock_in_state(recording, State.QUARANTINED, "only a quarantined recording can be re-checked")
        check = check_registry(recording)
        if check.problems:
            set_state(actor, recording, State.QUARANTINED, reason="; ".join(check.problems),
                      action="recording.rechecked", note_text="re-checked: still quarantined", **check.assignment())
            return recording
        set_state(actor, recording, State.QUEUED, action="recording.accepted",
                  note_text="re-checked: accepted; export queued", **check.assignment())
        queue.enqueue("recordings.export_recording", recording.pk)
    if (recording.audio == Recording.Audio.ENCRYPTED
            and not audio.keeps_audio(recording.study, consent=check.audio_consent, quarantined=False)):
        audio.purge_audio(actor, recording, rule="consent does not cover raw-audio retention")
    return recording


def register_demonstrator(actor, recording: Recording) -> Demonstrator:
    """A coordinator's explicit action on a quarantined recording whose demonstrator is not registered:
    register the designator it claims (or, when it claims none, a generated one with its headset's family
    pair) and tie it to the recording. Consent still has to be recorded before a re-check accepts it."""
    with transaction.atomic():
        lock_in_state(recording, State.QUARANTINED, "only a quarantined recording needs a demonstrator registered")
        if recording.demonstrator is not None:
            raise PipelineError(f"this recording already has demonstrator {recording.demonstrator}")
        claimed_headset = recording.claims.get("headset_id")
        if claimed_headset and recording.headset is None:
            raise PipelineError(f"register headset {claimed_headset!r} and re-check first: the designator's family "
                                f"pair comes from the headset")
        claimed = normalise_designator(recording.claims.get("demonstrator_id") or "")
        demonstrator = create_demonstrator(actor, recording.study, designator=claimed,
                                                    headset=recording.headset)
        set_state(actor, recording, recording.state, reason=recording.reason,
                  action="recording.demonstrator_registered", demonstrator=demonstrator,
                  note_text=f"demonstrator {demonstrator} registered for this recording; record their consent, "
                            f"then re-check")
    return demonstrator
