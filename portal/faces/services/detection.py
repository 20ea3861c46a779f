"""Detection: after an episode is verified (and again on demand, e.g. after a detector upgrade), the study's face
policy permitting, one job on the heavy queue reads the episode's MP4 from the shards storage (streamed to a
temporary file and checked against the receipt), runs the detector, and stores the detections file beside the shard
(``faces/<study>/<episode folder>/<detector_id>.parquet``; the shard itself stays immutable). The job holds a lease
on its ``FaceDetection`` row (``portal.core.leases``): of two workers on the same episode one works, the other
waits for the lease and then finds the job done."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from exporter.errors import SourceError
from exporter.faces import detector
from exporter.faces.detections import write_detections
from portal.audit.services import record
from portal.core import leases, queue, storage
from portal.faces.models import FaceDetection
from portal.recordings.models import Episode
from portal.studies.models import Study

State = FaceDetection.State
HEARTBEAT_SECONDS = 5.0


def current_detector_id() -> str:
    """The detector whose detections the gate asks for (its name, version, weights digest and settings)."""
    return detector.detector_id()


def detections_key(episode: Episode, detector_id: str) -> str:
    """Where the detections file of ``episode`` by ``detector_id`` lives in the shards storage: beside the shard,
    outside its prefix."""
    return f"faces/{episode.study.code}/{episode.folder}/{detector_id}.parquet"


def video_entry(episode: Episode) -> dict | None:
    """The shard's MP4 as its receipt lists it (path, sha256, bytes); None for an episode without video."""
    return next((entry for entry in episode.shard_files if entry["path"].endswith(".mp4")), None)


def queue_detection(actor, episode: Episode, *, again: bool = False) -> FaceDetection | None:
    """Queue the current detector over ``episode`` unless the study's policy is off (None then) or it is queued,
    running or done already (that row is returned; ``again`` queues a done or failed one once more). An episode
    without video has nothing to look at: None."""
    if episode.study.face_policy == Study.FacePolicy.OFF:
        return None
    if episode.exported_at is None or video_entry(episode) is None:  # no video: no face to look for
        return None
    detector_id = current_detector_id()
    with transaction.atomic():
        detection, created = FaceDetection.objects.get_or_create(
            episode=episode, detector_id=detector_id, defaults={"study": episode.study})
        detection = leases.lock(FaceDetection, pk=detection.pk)
        if not created:
            if detection.state in (State.QUEUED, State.RUNNING):
                return detection
            if detection.state == State.DONE and not again:
                return detection
            detection.state, detection.reason, detection.progress = State.QUEUED, "", 0
            detection.progress_note = "queued again"
            detection.save(update_fields=["state", "reason", "progress", "progress_note"])
        record(actor, "faces.detection_queued", episode,
               after={"episode": episode.folder, "detector_id": detector_id, "again": not created})
        queue.enqueue("faces.detect_episode", detection.pk)
    return detection


def queue_study(actor, study: Study, *, again: bool = False) -> int:
    """Queue detection for every exported episode of ``study`` that lacks the current detector's (or all, with
    ``again``); returns how many were queued. For episodes verified before faces were detected, and after a
    detector upgrade."""
    queued = 0
    for episode in Episode.objects.filter(study=study, exported_at__isnull=False).select_related("study"):
        before = FaceDetection.objects.filter(episode=episode, detector_id=current_detector_id()).first()
        detection = queue_detection(actor, episode, again=again)
        if detection is not None and (before is None or before.state != detection.state or again):
            queued += 1
    return queued


def claim(detection_id: int) -> FaceDetection | None:
    """Take the job's lease; None when there is nothing to do (done, failed, or the policy is off now).
    ``LeaseBusy`` while another attempt's lease is live."""
    with transaction.atomic():
        detection = leases.lock(FaceDetection, "study", "episode", pk=detection_id)
        if detection.state not in (State.QUEUED, State.RUNNING):
            return None
        if detection.study.face_policy == Study.FacePolicy.OFF:
            detection.state, detection.reason = State.FAILED, "the study's face policy is off"
            detection.save(update_fields=["state", "reason"])
            return None
        fields = leases.take(detection)
        detection.state, detection.progress, detection.progress_note = State.RUNNING, 1, "fetching the video"
        detection.save(update_fields=[*fields, "state", "progress", "progress_note"])
        return detection


def run_detection(detection_id: int) -> FaceDetection | None:
    """Detect faces in the episode's video and store the detections beside the shard. Idempotent: a done job is
    left alone. ``SourceError``/``ValueError`` (an unreadable video) fail it visibly; storage errors propagate for
    the task's retry."""
    detection = claim(detection_id)
    if detection is None:
        return None
    episode = detection.episode
    if detection.detector_id != current_detector_id():
        fail(detection, f"queued for {detection.detector_id} but this worker runs {current_detector_id()}")
        return detection
    entry = video_entry(episode)
    if entry is None:
        fail(detection, "the episode has no video")
        return detection
    beat = leases.Heartbeat(detection, HEARTBEAT_SECONDS)
    shards = storage.shards()
    try:
        with tempfile.TemporaryDirectory(prefix="ceres-faces-") as scratch:
            video = storage.fetch_checked(shards, episode.prefix + entry["path"], Path(scratch) / "video.mp4",
                                          entry["sha256"], entry["bytes"])
            beat(force=True, progress=5, progress_note="detecting faces")

            def progress(done: int, total: int) -> None:
                percent = 5 + (85 * done // total if total else 0)
                beat(progress=min(percent, 90), progress_note=f"frame {done} of {total}")

            found = detector.detect_video(video, threshold=detector.DEFAULT_THRESHOLD, progress=progress)
            data = write_detections(found)
            staged = Path(scratch) / "detections.parquet"
            staged.write_bytes(data)
            beat(force=True, progress=92, progress_note="storing the detections")
            key = detections_key(episode, detection.detector_id)
            sha256 = hashlib.sha256(data).hexdigest()
            storage.put_checked(shards, key, staged, sha256, len(data))
    except (SourceError, ValueError, storage.ObjectMismatch) as exc:
        fail(detection, f"detection failed: {exc}")
        return detection
    with transaction.atomic():
        return mark_done(leases.lock(FaceDetection, pk=detection.pk), found, key, sha256, len(data))


def mark_done(detection: FaceDetection, found, key: str, sha256: str, size: int) -> FaceDetection:
    """The job is done: its detections (``found``) are stored under ``key`` with this digest and size. Recorded
    in the audit log with the object and its digest, which a redact release reads back (``review.audit_mismatches``):
    detections swapped in the database alone stop it. Call inside a transaction holding the job's row."""
    frames = {int(frame) for frame in found.frames}
    detection.state, detection.progress, detection.progress_note = State.DONE, 100, "done"
    detection.lease_until, detection.finished_at = None, timezone.now()
    detection.threshold, detection.key, detection.sha256, detection.bytes = found.threshold, key, sha256, size
    detection.frame_count, detection.frames_with_faces = found.frame_count, len(frames)
    detection.box_count = len(found.frames)
    detection.save()
    record(None, "faces.detected", detection.episode, after={
        "episode": detection.episode.folder, "detector_id": detection.detector_id, "threshold": found.threshold,
        "key": key, "sha256": sha256, "frames": found.frame_count, "frames_with_faces": len(frames),
        "boxes": len(found.frames)})
    return detection


def fail(detection: FaceDetection, reason: str) -> None:
    """The job failed for good: the reason is shown on the episode's page; a coordinator or officer may queue it
    again."""
    with transaction.atomic():
        FaceDetection.objects.filter(pk=detection.pk).update(state=State.FAILED, reason=reason, lease_until=None,
                                                             progress_note="failed")
        record(None, "faces.detection_failed", detection.episode,
               after={"episode": detection.episode.folder, "detector_id": detection.detector_id, "reason": reason})
    detection.state, detection.reason = State.FAILED, reason


def note_retry(detection: FaceDetection, exc: BaseException, countdown: float) -> None:
    """A transient storage error: the lease is given back and the task retries."""
    leases.give_back(detection, state=State.QUEUED, progress_note=leases.retry_note(exc, countdown))
