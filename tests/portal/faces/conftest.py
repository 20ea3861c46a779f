"""Fixtures for faces: the releases' registry and verified episodes, in a study whose face policy the test names,
and stored detections of a detector the test names (``store_detections``)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from django.db import transaction
from django_scopes import scope

from exporter.faces.detections import Detections, write_detections
from portal.core import storage
from portal.faces.models import FaceDetection
from portal.faces.services import detection
from portal.studies.models import Study
from portal.studies.services.face_policy import set_face_policy
from tests.portal.releases import conftest as releases

(make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker, team,
 verified_factory, verified, make_request) = (
    releases.make_capture, releases.make_registry, releases.private_storage, releases.reg, releases.sent_tasks,
    releases.stored_objects, releases.unique_code, releases.worker, releases.team, releases.verified_factory,
    releases.verified, releases.make_request)

DETECTOR = "centerface-test-aaaaaaaaaaaa"
NEWER = "centerface-test-bbbbbbbbbbbb"


@pytest.fixture
def detector_id(monkeypatch):
    """The current detector's id, set by the test: ``detector_id(NEWER)`` is an upgrade."""

    def use(value: str) -> None:
        monkeypatch.setattr(detection.detector, "detector_id", lambda: value)

    use(DETECTOR)
    return use


@pytest.fixture
def policy(reg):
    """``policy("redact")``: the registry's study under that face policy (set by its ethics officer)."""

    def set_to(value: str) -> Study:
        return set_face_policy(reg.ethics, reg.study, value)

    return set_to


@pytest.fixture
def store_detections():
    """``store_detections(episode, {frame: [box, ...]}, detector=DETECTOR)``: a done detection job of ``detector``
    over ``episode`` with these boxes stored beside the shard, as the job stores them."""

    def store(episode, boxes: dict[int, list], *, detector: str = DETECTOR, width: int = 32,
              height: int = 24) -> FaceDetection:
        frames = [frame for frame, listed in sorted(boxes.items()) for _ in listed]
        flat = [box for _, listed in sorted(boxes.items()) for box in listed]
        found = Detections(detector="centerface", version="test", weights_sha256="a" * 64, threshold=0.5,
                           width=width, height=height, frame_count=episode.length,
                           frames=np.array(frames, dtype=np.int32),
                           boxes=np.array(flat, dtype=np.float32).reshape(-1, 4),
                           scores=np.full(len(frames), 0.9, dtype=np.float32))
        data = write_detections(found)
        key = detection.detections_key(episode, detector)
        with scope(study=episode.study):
            from io import BytesIO

            storage.put(storage.shards(), key, BytesIO(data))
            with transaction.atomic():
                job, _ = FaceDetection.objects.select_for_update().get_or_create(
                    episode=episode, detector_id=detector, defaults={"study": episode.study})
                detection.mark_done(job, found, key, hashlib.sha256(data).hexdigest(), len(data))
        return job

    return store
