"""A real worker (Redis broker, PostgreSQL) killed mid-export, and the S3 gateway gone mid-export."""

from __future__ import annotations

import subprocess
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

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[3]
VISIBILITY_TIMEOUT = 60  # the worker's CERES_TASK_VISIBILITY_TIMEOUT (its minimum)
DONE = (Recording.State.EXPORTED, Recording.State.VERIFIED)  # the worker verifies right after the export


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


def test_worker_killed_mid_export(reg, make_capture, worker):
    recording = accepted(reg, make_capture, seconds=30.0, aligned=False, width=160, height=120)
    worker.start()
    worker.send(tasks.export_recording, recording.pk)
    busy = wait_for(lambda: (r := load(recording)).state == Recording.State.RUNNING and r.progress >= 30 and r,
                    90, "the export to be running")
    killed_at = time.monotonic()
    worker.kill()
    stalled = load(recording)
    assert stalled.state == Recording.State.RUNNING, f"the export finished before the kill ({busy.progress_note})"
    with scope(study=reg.study):
        prefix = Episode.objects.get().prefix
    assert prefix + RECEIPT not in storage.walk(storages["shards"], prefix), "a shard was completed by a dead worker"

    # The unacknowledged message is delivered again once its visibility timeout has passed.
    time.sleep(max(0.0, VISIBILITY_TIMEOUT + 1 - (time.monotonic() - killed_at)))
    worker.start()
    wait_for(lambda: load(recording).state in DONE, 120, "the export after the restart", 0.5)
    assert_exported_once(reg, recording)
    assert log_of(recording).split("\n").count("export started") == 2


@pytest.mark.s3
def test_s3_gateway_down_during_export(reg, make_capture, worker, settings):
    if settings.STORAGE_BACKEND != "s3":
        pytest.skip("needs the S3 gateway: CERES_STORAGE=s3 and infra/swift/start.sh")
    swift = REPO / "infra" / "swift"
    recording = accepted(reg, make_capture, seconds=20.0, aligned=False)
    worker.start()
    worker.send(tasks.export_recording, recording.pk)
    wait_for(lambda: load(recording).progress >= 30, 90, "the export to be running")
    subprocess.run(["bash", f"{swift}/stop.sh", "--proxy-only"], check=True, capture_output=True)
    try:
        wait_for(lambda: "storage error, retrying" in log_of(recording), 120, "a retry after the storage error", 0.5)
        assert load(recording).state in (Recording.State.QUEUED, Recording.State.RUNNING)
    finally:
        subprocess.run(["bash", f"{swift}/start.sh", "--proxy-only"], check=True, capture_output=True)
    wait_for(lambda: load(recording).state in DONE, 400, "the export after the gateway is back", 1.0)
    assert_exported_once(reg, recording)
