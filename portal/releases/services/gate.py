"""The automatic release gate: one checklist per episode, computed here and nowhere else. The request page
shows it; submitting and approving refuse while any check fails, naming the episode and why.

Two checks read the stored shard's bytes (the video's streams, the leak scan). A shard is immutable and its
receipt is re-verified, so they run once per request, in a task (``inspect_request``), and are stored on the
request's items; until then they are pending, which blocks like a failure. The other checks read the registry
live, every time the gate is computed.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from exporter.errors import SourceError
from exporter.leaks import capture_identifiers, find_leaks
from exporter.receipt import file_digest
from exporter.source import MANIFEST
from exporter.video import has_audio_stream
from portal.audit.services import record
from portal.core import storage
from portal.faces.models import FaceDetection
from portal.faces.services import detection as faces_detection
from portal.faces.services import review as faces_review
from portal.recordings.models import Episode, Recording
from portal.recordings.services.audio import overdue_purge_rule
from portal.releases.exceptions import GateFailed
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.studies.models import ConsentEvent, Demonstrator, Study
from portal.studies.services.consent import consent_coverage
from portal.studies.services.headsets import not_the_studys_on

PASS, FAIL, PENDING = "pass", "fail", "pending"
RELEASE_SCOPE = ConsentEvent.Scope.EPISODE_RELEASE
LABELS = {
    "consent": "Consent covers the recording date and episode release",
    "withdrawal": "Demonstrator has not withdrawn",
    "headset": "Headset registered to the study on the recording date",
    "audio": "Audio policy honoured",
    "receipt": "Receipt verified recently",
    "leaks": "No raw device identifier or user-agent string",
    "faces": "Bystanders' faces detected and reviewed",
}


@dataclass(frozen=True)
class Check:
    key: str
    status: str
    detail: str

    @property
    def label(self) -> str:
        return LABELS[self.key]

    @property
    def passed(self) -> bool:
        return self.status == PASS


@dataclass
class EpisodeGate:
    item: ReleaseItem
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def problems(self) -> list[str]:
        return [f"{check.label.lower()}: {check.detail}" for check in self.checks if not check.passed]


@dataclass
class Gate:
    episodes: list[EpisodeGate]

    @property
    def passed(self) -> bool:
        return all(episode.passed for episode in self.episodes)

    @property
    def pending(self) -> bool:
        return any(check.status == PENDING for episode in self.episodes for check in episode.checks)

    def failures(self) -> list[dict[str, Any]]:
        return [{"episode": episode.item.folder, "problems": episode.problems}
                for episode in self.episodes if not episode.passed]

    def message(self) -> str:
        return "; ".join(f"{failure['episode']}: {', '.join(failure['problems'])}" for failure in self.failures())


def evaluate(release: ReleaseRequest, *, now: datetime | None = None, item: ReleaseItem | None = None) -> Gate:
    """The checklist of every episode of the request (or of its one ``item``), as of ``now``."""
    now = now or timezone.now()
    items = release.items.filter(pk=item.pk) if item is not None else release.items.all()
    items = items.select_related("episode", "episode__recording__study", "episode__recording__headset",
                                 "episode__recording__demonstrator")
    events: dict[int, list[ConsentEvent]] = {}
    gate = Gate([])
    for item in items:
        recording = item.episode.recording
        recorded_on = recording.recorded_on
        demonstrator = recording.demonstrator
        if demonstrator is not None and demonstrator.pk not in events:
            events[demonstrator.pk] = list(ConsentEvent.objects.filter(demonstrator=demonstrator)
                                           .order_by("event_date", "recorded_at", "pk"))
        gate.episodes.append(EpisodeGate(item, [
            _consent(demonstrator, recorded_on),
            _withdrawal(demonstrator, recorded_on, events.get(getattr(demonstrator, "pk", None), [])),
            _headset(recording, recorded_on),
            _audio(item, recording, now),
            _receipt(item, item.episode, now),
            _leaks(item),
            *_faces(release, item.episode),
        ]))
    return gate


def require_passing(release: ReleaseRequest, what: str) -> Gate:
    """``GateFailed`` naming every failing episode and why, unless the whole gate passes."""
    gate = evaluate(release)
    if not gate.passed:
        raise GateFailed(f"{release.release_id} cannot be {what}: the release gate fails for "
                         f"{gate.message()}", gate.failures())
    return gate


def consent_checks(recordings: list[Recording]) -> dict[int, list[Check]]:
    """The two checks that can change after a release, computed live: consent and withdrawal, by recording id.
    A released episode may be downloaded only while both pass (researcher links, one-dataset downloads)."""
    demonstrators = {recording.demonstrator_id for recording in recordings if recording.demonstrator_id}
    events: dict[int, list[ConsentEvent]] = {}
    for event in (ConsentEvent.objects.filter(demonstrator__in=demonstrators).select_related("document")
                  .order_by("event_date", "recorded_at", "pk")):
        events.setdefault(event.demonstrator_id, []).append(event)
    return {recording.pk: [_consent(recording.demonstrator, recording.recorded_on),
                           _withdrawal(recording.demonstrator, recording.recorded_on,
                                       events.get(recording.demonstrator_id, []))]
            for recording in recordings}


def _consent(demonstrator: Demonstrator | None, recorded_on: date) -> Check:
    if demonstrator is None:
        return Check("consent", FAIL, "the recording has no registered demonstrator")
    coverage = consent_coverage(demonstrator, recorded_on, RELEASE_SCOPE)
    return Check("consent", PASS if coverage.covered else FAIL, f"{demonstrator}: {coverage.reason}")


def _withdrawal(demonstrator: Demonstrator | None, recorded_on: date, events: list[ConsentEvent]) -> Check:
    """Fails when the demonstrator stands withdrawn now, or withdrew on or after the recording date (a later
    renewal does not bring back recordings made under the consent they withdrew)."""
    if demonstrator is None:
        return Check("withdrawal", FAIL, "the recording has no registered demonstrator")
    withdrawals = [event for event in events if event.kind == ConsentEvent.Kind.WITHDRAWN]
    if events and events[-1].kind == ConsentEvent.Kind.WITHDRAWN:
        return Check("withdrawal", FAIL, f"{demonstrator} withdrew consent on {events[-1].event_date}")
    after = [event for event in withdrawals if event.event_date >= recorded_on]
    if after:
        return Check("withdrawal", FAIL, f"{demonstrator} withdrew consent on {after[0].event_date}, on or after "
                                         f"the recording date {recorded_on}")
    if withdrawals:
        return Check("withdrawal", PASS, f"withdrew on {withdrawals[-1].event_date}, before this recording, and "
                                         f"consented again")
    return Check("withdrawal", PASS, "no withdrawal recorded")


def _headset(recording: Recording, recorded_on: date) -> Check:
    """Passes when the headset was the study's on the recording date: assigned to it on or before that date
    (the registration date, or an earlier one a coordinator declared) and not retired on or before it."""
    headset = recording.headset
    if headset is None:
        return Check("headset", FAIL, "the recording has no registered headset")
    problem = not_the_studys_on(headset, recorded_on)
    if problem:
        return Check("headset", FAIL, problem)
    return Check("headset", PASS, f"{headset}: in the study since {headset.assigned_on} (registered on "
                                  f"{timezone.localdate(headset.registered_at)})")


def _audio(item: ReleaseItem, recording: Recording, now: datetime) -> Check:
    if item.inspected_at is None:
        return Check("audio", PENDING, "the stored video has not been read yet")
    if item.inspection_error:
        return Check("audio", FAIL, f"the stored shard could not be read: {item.inspection_error}")
    if item.video_has_audio:
        return Check("audio", FAIL, "the stored video has an audio stream")
    rule = overdue_purge_rule(recording, now) if recording.audio == Recording.Audio.ENCRYPTED else None
    if rule:
        return Check("audio", FAIL, f"raw audio is still kept although the rule '{rule}' says it is purged")
    policy = recording.study.audio_policy_label
    video = "the stored video has no audio stream" if item.video_has_audio is False else "no video"
    return Check("audio", PASS, f"{video}; raw audio {recording.get_audio_display().lower()} (policy {policy})")


def _receipt(item: ReleaseItem, episode: Episode, now: datetime) -> Check:
    if episode.receipt_sha256 != item.receipt_sha256:
        return Check("receipt", FAIL, "the episode's receipt is not the one frozen in the request")
    if episode.receipt_status == Episode.Receipt.MISMATCH:
        return Check("receipt", FAIL, f"the stored shard did not match its receipt at "
                                      f"{episode.verified_at:%Y-%m-%d %H:%M}")
    max_age = timedelta(hours=settings.CERES_RELEASE_RECEIPT_MAX_AGE_HOURS)
    if episode.verified_at is None or episode.receipt_status != Episode.Receipt.VERIFIED:
        return Check("receipt", FAIL, "the shard has not been verified; re-verify it")
    if now - episode.verified_at > max_age:
        return Check("receipt", FAIL, f"last verified {episode.verified_at:%Y-%m-%d %H:%M}, more than "
                                      f"{settings.CERES_RELEASE_RECEIPT_MAX_AGE_HOURS} h ago; re-verify it")
    return Check("receipt", PASS, f"verified {episode.verified_at:%Y-%m-%d %H:%M}")


def _leaks(item: ReleaseItem) -> Check:
    if item.inspected_at is None:
        return Check("leaks", PENDING, "the stored shard has not been scanned yet")
    if item.inspection_error:
        return Check("leaks", FAIL, f"the stored shard could not be read: {item.inspection_error}")
    if item.leaks:
        return Check("leaks", FAIL, "; ".join(item.leaks))
    return Check("leaks", PASS, f"none in the {len(item.files)} stored files")


def _faces(release: ReleaseRequest, episode: Episode) -> list[Check]:
    """Under the request's face policy (the study's when it was requested): ``redact`` needs the current
    detector's detections and an ethics officer's review of them; ``detect`` needs the detections; ``off`` (or a
    request made before faces were looked for) has no line."""
    policy = release.face_policy
    if policy not in (Study.FacePolicy.DETECT, Study.FacePolicy.REDACT):
        return []
    if faces_detection.video_entry(episode) is None:
        return [Check("faces", PASS, "no video: no face to look for")]
    detector_id = faces_detection.current_detector_id()
    detection = faces_review.current_detection(episode, detector_id)
    if detection is None or detection.state != FaceDetection.State.DONE:
        state = "not run" if detection is None else detection.get_state_display().lower()
        if detection is not None and detection.reason:
            state += f": {detection.reason}"
        older = episode.face_detections.exclude(detector_id=detector_id).filter(state=FaceDetection.State.DONE).first()
        hint = f" (detections of the older {older.detector_id} do not count)" if older else ""
        return [Check("faces", FAIL, f"face detection by {detector_id} {state}{hint}")]
    found = f"{detection.box_count} box(es) in {detection.frames_with_faces} frame(s) by {detector_id}"
    if policy == Study.FacePolicy.DETECT:
        return [Check("faces", PASS, f"policy detect: {found}")]
    review = faces_review.reviewed(episode, detector_id)
    if review is None:
        return [Check("faces", FAIL, f"{found}; not reviewed by an ethics officer since the last change")]
    return [Check("faces", PASS, f"{found}; reviewed by {review.reviewed_by} on {review.reviewed_at:%Y-%m-%d %H:%M}")]


# --- reading the stored shard ----------------------------------------------------------------------


def _fetch_capture_json(recording: Recording, folder: Path) -> Path:
    """The stored capture source's ``capture.json``, fetched into ``folder``."""
    entry = next((item for item in recording.source_files if item["name"] == MANIFEST), None)
    if entry is None:
        raise ValueError(f"the stored capture source has no {MANIFEST}")
    local = folder / MANIFEST
    storage.fetch(storage.captures(), entry["path"], local)
    return local


def _inspect(item: ReleaseItem) -> dict[str, Any]:
    """Fetch the stored shard, check each file against the frozen digests, look for audio streams in its video
    and for the capture source's raw identifiers in its bytes."""
    episode = item.episode
    with tempfile.TemporaryDirectory(prefix="ceres-gate-") as scratch:
        root = Path(scratch) / "shard"
        for entry in item.files:
            local = root / entry["path"]
            storage.fetch(storage.shards(), episode.prefix + entry["path"], local)
            if file_digest(local) != (entry["sha256"], entry["bytes"]):
                return {"inspection_error": f"{entry['path']} does not match its receipt"}
        videos = [entry["path"] for entry in item.files if entry["path"].endswith(".mp4")]
        identifiers = capture_identifiers(_fetch_capture_json(episode.recording, Path(scratch) / "source"))
        return {
            "video_has_audio": any(has_audio_stream(root / name) for name in videos) if videos else None,
            "leaks": find_leaks(root, identifiers),
            "inspection_error": "",
        }


def inspect_request(release: ReleaseRequest) -> int:
    """Read the stored shard of every item not yet inspected (idempotent); returns how many were read."""
    done = 0
    for item in release.items.filter(inspected_at__isnull=True).select_related("episode__recording__study"):
        try:
            result = _inspect(item)
        except (FileNotFoundError, ValueError, SourceError) as exc:
            result = {"inspection_error": str(exc)}
        with transaction.atomic():
            ReleaseItem.objects.filter(pk=item.pk).update(inspected_at=timezone.now(), **result)
            record(None, "release.episode_inspected", release, after={"episode": item.folder, **result})
        done += 1
    return done
