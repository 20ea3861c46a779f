"""A real worker (Redis broker, PostgreSQL) releasing to storage: the S3 gateway stopped half-way, and the worker
SIGKILLed half-way. Either way the release completes once, with every object in place and checked, no
duplicate, and nothing is marked released that is not there. The worker's uploads are slowed
(``slow_worker.py``) so that "half-way" is a state the test waits for."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.release import MANIFEST, verify_release
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.core.signing import public_key
from portal.releases import tasks
from portal.releases.models import Release, ReleaseRequest
from portal.releases.services.approval import approve
from tests.portal.gateway import gateway

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[3]
VISIBILITY_TIMEOUT = 10  # the worker's CERES_TASK_VISIBILITY_TIMEOUT (its minimum)
State = ReleaseRequest.State


def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def progress(request: ReleaseRequest) -> tuple[str, Release | None]:
    with scope(study=request.study):
        fresh = ReleaseRequest.objects.get(pk=request.pk)
        return fresh.state, Release.objects.filter(request=request).first()


@pytest.fixture
def slow_worker(worker):
    """The pipeline's worker fixture, started through ``slow_worker.py``."""
    worker.env.update(CERES_RELEASE_LEASE_SECONDS="3", CERES_TEST_PUT_DELAY="0.4", CERES_RELEASE_THREADS="2")

    def start() -> None:
        with worker.log.open("ab") as log:
            worker.process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("slow_worker.py"))],
                                              cwd=REPO, env=worker.env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)

    worker.start = start
    return worker


@pytest.fixture
def approved(slow_worker, team, verified, make_request):
    """Three episodes approved; exported after the worker's storage settings are in place (they share it)."""
    request = make_request(verified(3))
    with scope(study=team.study):
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
    return request


def assert_released_once(request: ReleaseRequest, tmp_path: Path) -> Release:
    state, release = progress(request)
    assert state == State.RELEASED
    names = storage.walk(storages["releases"], request.prefix)
    assert len(names) == len(set(names)) == release.objects_total == release.objects_copied
    folder = tmp_path / "download"
    for name in names:
        storage.fetch(storages["releases"], name, folder / name[len(request.prefix):])
    verify_release(folder, public_key())
    assert AuditEvent.objects.filter(action="release.published").count() == 1
    assert AuditEvent.objects.filter(action="release.signed").count() == 1
    return release


def test_worker_killed_mid_release_completes_once(approved, slow_worker, tmp_path):
    slow_worker.start()
    slow_worker.send(tasks.publish_release, approved.pk)
    wait_for(lambda: (p := progress(approved))[1] is not None and p[1].objects_copied >= 3, 120,
             "the release to be half-way")
    killed_at = time.monotonic()
    slow_worker.kill()
    state, stalled = progress(approved)
    assert state == State.RELEASING and stalled.objects_copied < stalled.objects_total
    assert approved.prefix + MANIFEST not in storage.walk(storages["releases"], approved.prefix)

    # The unacknowledged message is delivered again once its visibility timeout has passed.
    time.sleep(max(0.0, VISIBILITY_TIMEOUT + 1 - (time.monotonic() - killed_at)))
    slow_worker.start()
    wait_for(lambda: progress(approved)[0] == State.RELEASED, 180, "the release after the restart", 0.5)
    release = assert_released_once(approved, tmp_path)
    assert release.attempts == 2 and release.objects_found >= stalled.objects_copied


@pytest.mark.s3
@pytest.mark.outage
def test_s3_gateway_down_mid_release_is_retried_and_completes(approved, slow_worker, settings, tmp_path):
    if settings.STORAGE_BACKEND != "s3":
        pytest.skip("needs the S3 gateway: CERES_STORAGE=s3 and infra/swift/start.sh")
    slow_worker.start()
    slow_worker.send(tasks.publish_release, approved.pk)
    wait_for(lambda: (p := progress(approved))[1] is not None and p[1].objects_copied >= 3, 120,
             "the release to be half-way")
    gateway("stop.sh")
    try:
        wait_for(lambda: "storage error, retrying" in (progress(approved)[1].last_error or ""), 180,
                 "a retry after the storage error", 0.5)
        state, stalled = progress(approved)
        assert state == State.RELEASING and stalled.finished_at is None
    finally:
        gateway("start.sh")
    wait_for(lambda: progress(approved)[0] == State.RELEASED, 400, "the release after the gateway is back", 1.0)
    release = assert_released_once(approved, tmp_path)
    assert release.attempts >= 2
