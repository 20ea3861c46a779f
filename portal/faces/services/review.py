"""The ethics officers' review of an episode's faces: boxes added over missed faces for a span of frames (keyframes,
interpolated linearly between them), detections removed as false, and the episode marked reviewed for a detector.
Only the study's ethics officers act here; every change is an audit event. ``merged_boxes`` is what a redaction
fills: the current detector's detections, minus the removed ones, plus the added spans."""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from itertools import pairwise

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from exporter.faces.detections import Box, Detections, read_detections
from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.models import AuditEvent
from portal.audit.services import record
from portal.core import storage
from portal.faces.exceptions import FacesError, FacesRefused
from portal.faces.models import FaceDetection, FaceRemoval, FaceReview, FaceSpan
from portal.faces.services.detection import current_detector_id
from portal.recordings.models import Episode

MAX_KEYFRAMES = 500


def require_officer(actor, episode: Episode, what: str) -> None:
    """``FacesRefused`` unless ``actor`` is an ethics officer of the episode's study."""
    if not getattr(actor, "is_authenticated", False) or not has_role(actor, episode.study, Role.ETHICS_OFFICER):
        raise FacesRefused(f"only an ethics officer of study {episode.study.code} can {what}")


def current_detection(episode: Episode, detector_id: str | None = None) -> FaceDetection | None:
    """The newest job of the current detector (or of ``detector_id``) over ``episode``, whatever its state."""
    return FaceDetection.objects.filter(episode=episode, detector_id=detector_id or current_detector_id()).first()


def load(detection: FaceDetection) -> Detections | None:
    """The stored detections of a done job, checked against the digest recorded when they were stored; None when
    the job stored none (not done)."""
    if detection.state != FaceDetection.State.DONE or not detection.key:
        return None
    with storage.stream(storage.shards(), detection.key) as source:
        data = source.read()
    if hashlib.sha256(data).hexdigest() != detection.sha256:
        raise FacesError(f"{detection.key}: the stored detections do not match the digest recorded when stored")
    return read_detections(data)


def detected_boxes(found: Detections | None) -> dict[int, list[tuple[Box, float]]]:
    """Frame → its detections (box, score) in the file's order: a detection's index in its frame names it."""
    boxes: dict[int, list[tuple[Box, float]]] = defaultdict(list)
    if found is None:
        return boxes
    for frame, box, score in zip(found.frames.tolist(), found.boxes.tolist(), found.scores.tolist(), strict=True):
        boxes[int(frame)].append((tuple(float(v) for v in box), float(score)))
    return boxes


# --- keyframes --------------------------------------------------------------------------------------------


def check_keyframes(keyframes, episode: Episode, size: tuple[int, int] | None = None) -> list[list]:
    """``[[frame, x0, y0, x1, y1], ...]``: frames whole numbers of the episode, ascending; boxes in pixels with
    x0 < x1 and y0 < y1 (inside the frame when its ``size`` (width, height) is known). Returns them normalised."""
    if not isinstance(keyframes, list) or not keyframes:
        raise FacesError("keyframes must be a non-empty list of [frame, x0, y0, x1, y1]")
    if len(keyframes) > MAX_KEYFRAMES:
        raise FacesError(f"at most {MAX_KEYFRAMES} keyframes per added box")
    clean, last = [], -1
    for number, key in enumerate(keyframes, start=1):
        if not isinstance(key, list | tuple) or len(key) != 5:
            raise FacesError(f"keyframe {number}: expected [frame, x0, y0, x1, y1], got {key!r}")
        frame = key[0]
        if isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < episode.length:
            raise FacesError(f"keyframe {number}: frame {frame!r} is not a frame of the episode (0 to "
                             f"{episode.length - 1})")
        if frame <= last:
            raise FacesError(f"keyframe {number}: frame {frame} does not come after frame {last}")
        coords = []
        for value in key[1:]:
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise FacesError(f"keyframe {number}: box coordinate {value!r} is not a number")
            coords.append(float(value))
        x0, y0, x1, y1 = coords
        if not (0 <= x0 < x1 and 0 <= y0 < y1):
            raise FacesError(f"keyframe {number}: box {coords} needs 0 <= x0 < x1 and 0 <= y0 < y1 (pixels)")
        if size is not None and (x1 > size[0] or y1 > size[1]):
            raise FacesError(f"keyframe {number}: box {coords} reaches outside the {size[0]}x{size[1]} frame")
        clean.append([frame, *coords])
        last = frame
    return clean


def interpolate(keyframes: list[list]) -> dict[int, Box]:
    """Every frame from the first keyframe to the last, its box linearly interpolated between the keyframes."""
    boxes: dict[int, Box] = {}
    for (f0, *a), (f1, *b) in pairwise(keyframes):
        for frame in range(f0, f1):
            t = (frame - f0) / (f1 - f0)
            boxes[frame] = tuple(p + (q - p) * t for p, q in zip(a, b, strict=True))
    frame, *last = keyframes[-1]
    boxes[frame] = tuple(last)
    return boxes


# --- what a redaction fills ---------------------------------------------------------------------------------


def merged_boxes(episode: Episode) -> dict[int, list[Box]]:
    """Frame → boxes (pixels): the current detector's detections minus those an officer removed, plus the boxes
    officers added, interpolated per frame. Frames without a box are absent."""
    detector_id = current_detector_id()
    detection = current_detection(episode, detector_id)
    found = load(detection) if detection is not None else None
    removed = set(FaceRemoval.objects.filter(episode=episode, detector_id=detector_id)
                  .values_list("frame", "index"))
    merged: dict[int, list[Box]] = defaultdict(list)
    for frame, boxes in detected_boxes(found).items():
        merged[frame].extend(box for index, (box, _) in enumerate(boxes) if (frame, index) not in removed)
    for span in FaceSpan.objects.filter(episode=episode, removed_at__isnull=True):
        for frame, box in interpolate(span.keyframes).items():
            merged[frame].append(box)
    return {frame: boxes for frame, boxes in sorted(merged.items()) if boxes}


def frame_ranges(frames) -> list[list[int]]:
    """Sorted frames as ``[[first, last], ...]`` runs: the timeline of frames with faces."""
    runs: list[list[int]] = []
    for frame in sorted(frames):
        if runs and frame == runs[-1][1] + 1:
            runs[-1][1] = frame
        else:
            runs.append([frame, frame])
    return runs


# --- the officers' changes -----------------------------------------------------------------------------------


def _size(episode: Episode) -> tuple[int, int] | None:
    detection = current_detection(episode)
    found = load(detection) if detection is not None else None
    return (found.width, found.height) if found is not None else None


@transaction.atomic
def add_span(actor, episode: Episode, keyframes) -> FaceSpan:
    """An ethics officer adds a box over a missed face for the frames from the first keyframe to the last."""
    require_officer(actor, episode, "add a box over a face")
    keyframes = check_keyframes(keyframes, episode, _size(episode))
    span = FaceSpan.objects.create(study=episode.study, episode=episode, keyframes=keyframes, added_by=actor)
    record(actor, "faces.box_added", episode, after={"episode": episode.folder, "span": span.pk,
                                                     "keyframes": keyframes})
    return span


@transaction.atomic
def remove_span(actor, span: FaceSpan) -> FaceSpan:
    """An ethics officer takes back a box added over a face (the row stays, marked removed)."""
    require_officer(actor, span.episode, "remove an added box")
    span = FaceSpan.objects.select_for_update(of=("self",)).get(pk=span.pk)
    if span.removed_at is not None:
        raise FacesError(f"the added box {span.pk} was removed already")
    span.removed_by, span.removed_at = actor, timezone.now()
    span.save(update_fields=["removed_by", "removed_at"])
    record(actor, "faces.box_span_removed", span.episode,
           after={"episode": span.episode.folder, "span": span.pk, "keyframes": span.keyframes})
    return span


@transaction.atomic
def remove_detection(actor, episode: Episode, *, frame, index) -> FaceRemoval:
    """An ethics officer removes a false detection of the current detector: the ``index``-th box of ``frame``."""
    require_officer(actor, episode, "remove a detection")
    for name, value in (("frame", frame), ("index", index)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FacesError(f"{name} must be a whole number of at least 0, not {value!r}")
    detection = current_detection(episode)
    if detection is None or detection.state != FaceDetection.State.DONE:
        raise FacesError(f"{episode.folder} has no detections of the current detector {current_detector_id()}")
    boxes = detected_boxes(load(detection)).get(frame, [])
    if index >= len(boxes):
        raise FacesError(f"frame {frame} of {episode.folder} has {len(boxes)} detection(s); there is no number "
                         f"{index}")
    if FaceRemoval.objects.filter(episode=episode, detector_id=detection.detector_id, frame=frame,
                                  index=index).exists():
        raise FacesError(f"detection {index} of frame {frame} was removed already")
    box, score = boxes[index]
    removal = FaceRemoval.objects.create(study=episode.study, episode=episode, detector_id=detection.detector_id,
                                         frame=frame, index=index, box=list(box), removed_by=actor)
    record(actor, "faces.detection_removed", episode, after={
        "episode": episode.folder, "detector_id": detection.detector_id, "frame": frame, "index": index,
        "box": list(box), "score": score})
    return removal


@transaction.atomic
def mark_reviewed(actor, episode: Episode) -> FaceReview:
    """An ethics officer marks the episode's faces reviewed for the current detector's detections."""
    require_officer(actor, episode, "mark an episode's faces reviewed")
    detection = current_detection(episode)
    if detection is None or detection.state != FaceDetection.State.DONE:
        raise FacesError(f"{episode.folder} has no detections of the current detector {current_detector_id()} to "
                         f"review")
    review = FaceReview.objects.create(study=episode.study, episode=episode, detector_id=detection.detector_id,
                                       reviewed_by=actor)
    record(actor, "faces.reviewed", episode, after={
        "episode": episode.folder, "detector_id": detection.detector_id, "boxes": detection.box_count,
        "added": FaceSpan.objects.filter(episode=episode, removed_at__isnull=True).count(),
        "removed": FaceRemoval.objects.filter(episode=episode, detector_id=detection.detector_id).count()})
    return review


def last_change(episode: Episode, detector_id: str):
    """When the episode's boxes last changed by an officer's hand (for ``detector_id``'s detections)."""
    times = [FaceSpan.objects.filter(episode=episode).aggregate(at=Max("added_at"))["at"],
             FaceSpan.objects.filter(episode=episode).aggregate(at=Max("removed_at"))["at"],
             FaceRemoval.objects.filter(episode=episode, detector_id=detector_id).aggregate(at=Max("removed_at"))["at"]]
    times = [at for at in times if at is not None]
    return max(times) if times else None


def reviewed(episode: Episode, detector_id: str) -> FaceReview | None:
    """The review that stands for ``detector_id``: the newest, by someone who is still an ethics officer of the
    study, made after the last change to the episode's boxes; None otherwise."""
    review = FaceReview.objects.filter(episode=episode, detector_id=detector_id).select_related("reviewed_by").first()
    if review is None or not has_role(review.reviewed_by, episode.study, Role.ETHICS_OFFICER):
        return None
    changed = last_change(episode, detector_id)
    return review if changed is None or changed <= review.reviewed_at else None


# The events the faces services write with each row a redaction depends on, read back by ``audit_mismatches``.
AUDITED = ("faces.detected", "faces.box_added", "faces.box_span_removed", "faces.detection_removed", "faces.reviewed")


def _keyframes(value) -> list[tuple]:
    """Keyframes compared by value; ones that do not read as keyframes (a row or event written by hand) stay as
    they are, so they differ from any readable ones instead of stopping the check."""
    try:
        return [(int(key[0]), *(round(float(v), 3) for v in key[1:])) for key in value or []]
    except (TypeError, ValueError, IndexError, KeyError):
        return [("unreadable", repr(value))]


def audit_mismatches(episode: Episode) -> list[str]:
    """Why the boxes a redaction of ``episode`` would fill now, and the review that stands for them, are not what
    the audit log recorded as they were made (empty when they are).

    The current detector's stored detections (object and digest), the added boxes still standing (and their
    keyframes), the detections removed and the standing review are each rebuilt from the events the services
    wrote in the same transaction as the rows (``AUDITED``). A row deleted, added or changed by someone who can
    write to the database, without its event, shows here: a box an officer added and a writer deleted would
    otherwise leave that face unfilled in a signed release. (Events forged as well are for ``audit_verify`` and the
    signed checkpoints, as for the release's approvals.)"""
    detector_id = current_detector_id()
    detected, spans, removals, changed, review = None, {}, set(), 0, None
    for seq, action, actor_id, after in AuditEvent.objects.filter(
            target_type=f"{Episode._meta.app_label}.{Episode._meta.model_name}", target_id=str(episode.pk),
            action__in=AUDITED).order_by("seq").values_list("seq", "action", "actor_id", "after"):
        after = after if isinstance(after, dict) else {}
        if action == "faces.box_added":
            spans[after.get("span")], changed = _keyframes(after.get("keyframes")), seq
        elif action == "faces.box_span_removed":
            spans.pop(after.get("span"), None)
            changed = seq
        elif after.get("detector_id") != detector_id:
            continue
        elif action == "faces.detected":
            detected = (after.get("key"), after.get("sha256"))
        elif action == "faces.detection_removed":
            removals.add((after.get("frame"), after.get("index")))
            changed = seq
        elif action == "faces.reviewed":
            review = (seq, actor_id)
    problems = []
    detection = current_detection(episode, detector_id)
    if detection is not None and detection.state == FaceDetection.State.DONE \
            and (detection.key, detection.sha256) != detected:
        problems.append(f"{episode.folder}: the stored detections of {detector_id} ({detection.key}, SHA-256 "
                        f"{detection.sha256}) are not the ones the audit log recorded when they were stored ("
                        f"{'none' if detected is None else f'{detected[0]}, SHA-256 {detected[1]}'})")
    rows = {span.pk: _keyframes(span.keyframes) for span in FaceSpan.objects.filter(episode=episode,
                                                                                     removed_at__isnull=True)}
    for pk in sorted(spans.keys() - rows.keys(), key=str):
        problems.append(f"{episode.folder}: the box added over a face as number {pk} (frames {spans[pk][0][0]} to "
                        f"{spans[pk][-1][0]}) stands in the audit log but not in the database")
    for pk in sorted(rows.keys() - spans.keys()):
        problems.append(f"{episode.folder}: the added box {pk} is in the database but the audit log records no "
                        f"such box standing")
    for pk in sorted(rows.keys() & spans.keys(), key=str):
        if rows[pk] != spans[pk]:
            problems.append(f"{episode.folder}: the added box {pk}'s keyframes are not the ones the audit log "
                            f"recorded")
    kept = set(FaceRemoval.objects.filter(episode=episode, detector_id=detector_id).values_list("frame", "index"))
    for frame, index in sorted(kept - removals):
        problems.append(f"{episode.folder}: detection {index} of frame {frame} is removed in the database but the "
                        f"audit log records no officer removing it")
    for frame, index in sorted(removals - kept, key=str):
        problems.append(f"{episode.folder}: detection {index} of frame {frame} was removed by an officer (audit "
                        f"log) but the database no longer says so")
    standing = reviewed(episode, detector_id)
    if standing is not None and (review is None or review[0] < changed or review[1] != standing.reviewed_by_id):
        problems.append(f"{episode.folder}: the database has its faces reviewed by {standing.reviewed_by} for "
                        f"{detector_id}, but the audit log records no such review after the last change to its "
                        f"boxes")
    return problems


def episode_faces(episode: Episode, *, detections: bool = True) -> dict:
    """What the viewer and the API show of an episode's faces: the policy, the current detector's job (state,
    progress, counts), the timeline of frames with faces (merged), each detection (frame, index, box, score,
    removed), the added boxes, and the review that stands."""
    detector_id = current_detector_id()
    detection = current_detection(episode, detector_id)
    found = load(detection) if detection is not None else None
    removed = set(FaceRemoval.objects.filter(episode=episode, detector_id=detector_id).values_list("frame", "index"))
    spans = list(FaceSpan.objects.filter(episode=episode, removed_at__isnull=True).select_related("added_by"))
    review = reviewed(episode, detector_id)
    merged = merged_boxes(episode) if found is not None or spans else {}
    result = {
        "episode": episode.folder,
        "policy": episode.study.face_policy,
        "detector_id": detector_id,
        "detection": None if detection is None else {
            "state": detection.state, "progress": detection.progress, "progress_note": detection.progress_note,
            "reason": detection.reason, "threshold": detection.threshold, "key": detection.key,
            "sha256": detection.sha256, "frame_count": detection.frame_count, "box_count": detection.box_count,
            "frames_with_faces": detection.frames_with_faces,
        },
        "size": [found.width, found.height] if found is not None else None,
        "ranges": frame_ranges(merged),
        "spans": [{"id": span.pk, "keyframes": span.keyframes, "added_by": span.added_by.get_username(),
                   "added_at": span.added_at.isoformat()} for span in spans],
        "removed": len(removed),
        "review": None if review is None else {"reviewed_by": review.reviewed_by.get_username(),
                                                 "reviewed_at": review.reviewed_at.isoformat(),
                                                 "detector_id": review.detector_id},
    }
    if detections:
        result["detections"] = [
            {"frame": frame, "index": index, "box": [round(v, 1) for v in box], "score": round(score, 3),
             "removed": (frame, index) in removed}
            for frame, boxes in sorted(detected_boxes(found).items()) for index, (box, score) in enumerate(boxes)]
    return result
