"""A real worker (Redis broker, PostgreSQL) killed mid-export, and the S3 gateway gone mid-export."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.receipt import RECEIPT
from portal.core import storage
from portal.recordings import tasks
from portal.recordings.models import Episode, Recording, StudyDataset
from portal.recordings.services.ingest import ingest_path
from portal.recordings.services.verification import verify_episode
from tests.portal.gateway import gateway

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[3]
VISIBILITY_TIMEOUT = 10  # the worker's CERES_TASK_VISIBILITY_TIMEOUT (its minimum)
DONE = (Recording.State.EXPORTED, Recording.State.VERIFIED)  # the worker verifies right after the export
# The first and the last artefact of a shard with a camera (the upload goes in path order, receipt last).
FIRST_ARTEFACT = "ceres/episode-metadata.json"
VIDEO = "videos/observation.images.passthrough/chunk-000/file-000.mp4"


def wait_for(predicate, timeout: float, what: str, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def load(recording: Recording) -> Recording:
    with scope(study=recording.study):
        return Recording.objects.get(pk=recording.pk)


def log_of(recording: Recording) -> str:
    with scope(study=recording.study):
        return "\n".join(recording.log.values_list("message", flat=True))


def accepted(reg, make_capture, **kwargs) -> Recording:
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), **kwargs))
    assert recording.state == Recording.State.QUEUED, recording.reason
    return recording


def assert_exported_once(reg, recording: Recording) -> None:
    with scope(study=reg.study):
        episode = Episode.objects.get()
        dataset = StudyDataset.objects.get()
        assert episode.recording_id == recording.pk and episode.episode_index == 0
        assert (dataset.next_episode_index, dataset.next_frame_index) == (1, episode.length)
        assert verify_episode(episode).ok
    names = storage.walk(storages["shards"], reg.study.code)
    assert names and all(name.startswith(episode.prefix) for name in names)
    assert episode.prefix + RECEIPT in names


def stored_receipt_artefacts(prefix: str) -> list[str]:
    with storages["shards"].open(prefix + RECEIPT, "rb") as stream:
        return [artefact["path"] for artefact in json.loads(stream.read())["artefacts"]]


def test_worker_killed_mid_export(reg, make_capture, worker):
    """Killed in the middle of the upload (a barrier holds it before the video, the last artefact): the
    objects stored so far are there, the video and the receipt are not; the redelivered task replaces them."""
    recording = accepted(reg, make_capture)
    barrier = worker.pause_before(VIDEO)
    worker.start()
    worker.send(tasks.export_recording, recording.pk)
    paused = wait_for(barrier.paused, 120, "the upload to reach the video")
    worker.kill()
    killed_at = time.monotonic()
    with scope(study=reg.study):
        prefix = Episode.objects.get().prefix
    assert paused == prefix + VIDEO
    assert load(recording).state == Recording.State.RUNNING
    left = storage.walk(storages["shards"], prefix)
    assert left and prefix + VIDEO not in left and prefix + RECEIPT not in left, left
    barrier.release()

    # The unacknowledged message is delivered again once its visibility timeout has passed (the broker's
    # clock; a starting worker looks for such messages first).
    time.sleep(max(0.0, VISIBILITY_TIMEOUT + 1 - (time.monotonic() - killed_at)))
    worker.start()
    wait_for(lambda: load(recording).state in DONE, 120, "the export after the restart", 0.5)
    assert_exported_once(reg, recording)
    assert left == sorted(prefix + name for name in stored_receipt_artefacts(prefix) if name != VIDEO)
    log = log_of(recording).split("\n")
    assert log.count("export started") == 2
    assert f"removed {len(left)} objects left by an interrupted attempt under {prefix}" in log


@pytest.mark.s3
@pytest.mark.outage
def test_s3_gateway_down_during_export(reg, make_capture, worker, settings):
    """The gateway stops while the worker waits before the shard's first object (a barrier), so the upload
    meets the outage whatever the machine's speed: the task retries until the gateway is back."""
    if settings.STORAGE_BACKEND != "s3":
        pytest.skip("needs the S3 gateway: CERES_STORAGE=s3 and infra/swift/start.sh")
    recording = accepted(reg, make_capture)
    barrier = worker.pause_before(FIRST_ARTEFACT)
    worker.start()
    worker.send(tasks.export_recording, recording.pk)
    wait_for(barrier.paused, 120, "the upload to start")
    gateway("stop.sh")
    try:
        barrier.release()
        wait_for(lambda: "storage error, retrying" in log_of(recording), 120, "a retry after the storage error", 0.5)
        assert load(recording).state in (Recording.State.QUEUED, Recording.State.RUNNING)
        with scope(study=reg.study):
            assert not Episode.objects.get().exported_at
    finally:
        gateway("start.sh")
    wait_for(lambda: load(recording).state in DONE, 400, "the export after the gateway is back", 1.0)
    assert_exported_once(reg, recording)
