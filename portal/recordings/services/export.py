"""Export: take the export lease, allocate the episode in the study dataset, run the exporter on the stored
silent source, upload the shard crash-safe (receipt last, every object re-hashed from storage), and queue its
verification. Also what happens when an attempt fails: retry later, or fail visibly."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from exporter.errors import SourceError
from exporter.receipt import RECEIPT, file_digest, read_artefacts
from exporter.shard import export_shard
from exporter.task_table import extend_tasks
from portal.audit.services import record
from portal.core import leases, queue, storage
from portal.recordings.models import Episode, Recording, StudyDataset
from portal.recordings.services import audio
from portal.recordings.services.history import lock_in_state, note, set_state
from portal.studies.models import ConsentEvent, Study
from portal.studies.services.consent import consent_coverage

State = Recording.State
EPISODE_RELEASE = ConsentEvent.Scope.EPISODE_RELEASE


def claim_export(recording_id: int) -> Recording | None:
    """Take the export lease; None when there is nothing to do. A live lease of another attempt (or of a
    worker that was killed) raises ``LeaseBusy``: the task retries after it runs out."""
    with transaction.atomic():
        recording = leases.lock(Recording, "study", pk=recording_id)
        if recording.state not in (State.QUEUED, State.RUNNING):  # only a running one holds a lease
            return None
        lease = leases.take(recording)
        set_state(None, recording, State.RUNNING, action="recording.export_started", note_text="export started",
                  progress=5, progress_note="allocating the episode", **lease)
        return recording


def _progress(recording: Recording, percent: int, text: str) -> None:
    leases.renew(recording, progress=percent, progress_note=text)


@transaction.atomic
def allocate_episode(recording: Recording) -> Episode:
    """The recording's episode index and global frame range; the same allocation on every retry.

    The study dataset row is locked (``select_for_update``) while the counters advance and the task
    texts are appended, so concurrent exports of one study never collide.
    """
    existing = Episode.objects.filter(recording=recording).first()
    if existing is not None:
        return existing
    dataset, _ = StudyDataset.objects.select_for_update(no_key=True).get_or_create(study=recording.study)
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


def study_block(recording: Recording, coverage) -> dict[str, Any]:
    """The episode metadata's study block, from the registry (not the recorder's claims), the consent that covers
    the recording and the audio decision."""
    return {
        "headset_id": recording.headset.headset_id if recording.headset else None,
        "demonstrator_id": recording.demonstrator.designator if recording.demonstrator else None,
        "project_id": recording.study.project_id or None,
        "consent_date": coverage.event.event_date.isoformat() if coverage.event else None,
        "consent_document_id": (f"{coverage.document.identifier} v{coverage.document.version}"
                                if coverage.document else None),
        "raw_audio_retained": audio.raw_audio_retained(recording),
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
    # A withdrawal is never undone by a retry or a re-export: without covering consent now, nothing is exported.
    coverage = consent_coverage(recording.demonstrator, recording.recorded_on, EPISODE_RELEASE)
    if not coverage.covered:
        fail_export(recording, f"export refused: the consent no longer covers this recording ({coverage.reason})")
        return recording
    study = study_block(recording, coverage)
    try:
        episode = allocate_episode(recording)
        with transaction.atomic():
            tasks = StudyDataset.objects.get(study=recording.study).tasks[: episode.task_count]
        with tempfile.TemporaryDirectory(prefix="ceres-export-") as scratch:
            source = Path(scratch) / "source"
            _progress(recording, 15, f"fetching the source for {episode.folder}")
            for item in recording.source_files:
                storage.fetch(storage.captures(), item["path"], source / item["name"])
            _progress(recording, 30, f"exporting {episode.folder}")
            result = export_shard(source, Path(scratch) / "out", episode_index=episode.episode_index,
                                  from_index=episode.from_index, tasks=tasks, study=study)
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
        episode.raw_audio_retained = study["raw_audio_retained"]
        episode.save()
        recording.refresh_from_db()
        set_state(None, recording, State.EXPORTED, action="recording.exported",
                  note_text=f"exported as {episode.folder}: {result.rows} rows, video {result.video_method or 'none'}",
                  progress=100, progress_note="exported", lease_until=None)
        queue.enqueue("recordings.verify_episode", episode.pk)
    if recording.audio == Recording.Audio.ENCRYPTED and recording.study.audio_policy == Study.AudioPolicy.UNTIL_EXPORT:
        audio.purge_audio(None, recording, rule="until-export")
    return recording


def _publish_shard(recording: Recording, episode: Episode, shard_dir: Path) -> list[dict[str, Any]]:
    """Upload a local shard to its final keys, receipt last, each object re-hashed from the storage."""
    shards = storage.shards()
    removed = storage.delete_prefix(shards, episode.prefix)
    if removed:
        note(recording, f"removed {removed} objects left by an interrupted attempt under {episode.prefix}", "warning")
    artefacts = list(read_artefacts((shard_dir / RECEIPT).read_bytes()).values())
    for number, artefact in enumerate([*artefacts, {"path": RECEIPT}], start=1):
        local = shard_dir / artefact["path"]
        name = storage.put(shards, episode.prefix + artefact["path"], local)
        if storage.digest(shards, name) != file_digest(local):
            raise OSError(f"{name}: stored object does not match the uploaded file")
        _progress(recording, 60 + 35 * number // (len(artefacts) + 1), f"uploaded {artefact['path']}")
    return artefacts


def retry_export(actor, recording: Recording) -> Recording:
    """A coordinator queues a failed export again."""
    with transaction.atomic():
        lock_in_state(recording, State.FAILED, "only a failed export can be retried")
        set_state(actor, recording, State.QUEUED, action="recording.export_retried", note_text="export queued again",
                  progress=0, progress_note="")
        queue.enqueue("recordings.export_recording", recording.pk)
    return recording


def fail_export(recording: Recording, reason: str) -> None:
    """The export failed for good: the reason is shown and a coordinator may retry. A recording that was
    exported meanwhile (a later step of the task failed) keeps its state; the reason goes to its log."""
    with transaction.atomic():
        recording.refresh_from_db()
        if not set_state(None, recording, State.FAILED, reason=reason, action="recording.export_failed",
                         lease_until=None, if_allowed=True):
            note(recording, f"after export: {reason}", "error")


def note_retry(recording: Recording, exc: BaseException, countdown: float) -> None:
    """A transient error: the export goes back to the queue, its lease given back, and the task retries it."""
    with transaction.atomic():
        recording = leases.lock(Recording, pk=recording.pk)
        if recording.state == State.RUNNING:
            set_state(None, recording, State.QUEUED, action="recording.export_requeued", lease_until=None,
                      progress_note=f"retrying in {countdown:.0f} s after a storage error")
        note(recording, leases.retry_note(exc, countdown), "warning")
