"""The objects the face detections account for, for the fixity check: in the ``shards`` storage, beside each
episode's shard, ``faces/<study>/<episode folder>/<detector_id>.parquet`` of every done detection job (its
SHA-256 and length as recorded when it was stored); a job queued or running claims the episode's folder (it is
writing there, or will); a failed one stored nothing."""

from __future__ import annotations

import functools

from portal.faces.models import FaceDetection
from portal.fixity import registry

State = FaceDetection.State


def _detection(detection_id: int) -> list[registry.Expected]:
    detection = FaceDetection.objects.only("key", "sha256", "bytes").get(pk=detection_id)
    return [registry.Expected(detection.key, detection.sha256, detection.bytes)]


@registry.source
def detection_units(studies):
    detections = FaceDetection.objects.exclude(state=State.FAILED)
    if studies is not None:
        detections = detections.filter(study__in=studies)
    for pk, study_id, code, index, state, detector_id in detections.order_by().values_list(
            "pk", "study_id", "study__code", "episode__episode_index", "state", "detector_id").iterator(
            chunk_size=5000):
        folder = f"episode-{index:06d}"
        prefix, label = f"faces/{code}/{folder}/", f"{folder} (faces by {detector_id})"
        if state == State.DONE:
            yield registry.Unit("shards", prefix, study_id, label, expected=functools.partial(_detection, pk))
        else:
            yield registry.Unit("shards", prefix, study_id, label, claimed=True)
