"""Drills: PostgreSQL restarted while a release is being copied (the job retries and completes once, nothing left
half-done); the broker restarted with tasks queued (a Redis that keeps its queue on disk, as production's must:
nothing is lost)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import pytest
from django.core.files.storage import storages
from django.db import connection, connections
from django_scopes import scope

from portal.core import storage
from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path
from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, release_requests
from portal.releases.services.approval import approve
from tests.drills.forked_worker import ForkedWorker, rabbit_up, wait_for
from tests.drills.test_kills import events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _needs(*, rabbit: bool = True) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): the forked worker shares the test's database")
    if rabbit and not rabbit_up():
        pytest.skip("needs RabbitMQ (CERES_DRILL_BROKER_URL)")


def _cluster() -> tuple[str, str]:
    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    if not versions or shutil.which("pg_ctlcluster") is None:
        pytest.skip("needs a local PostgreSQL cluster that pg_ctlcluster can restart")
    return versions[-1], "main"


def _verified_episode(make_registry, make_capture, worker) -> tuple[object, object]:
    reg = make_registry()
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), seconds=1.0, width=32,
                                                                         height=24))
    worker.start()
    worker.send("recordings.export_recording", recording.pk)

    def verified():
        with scope(study=reg.study):
            return Recording.objects.get(pk=recording.pk).state == Recording.State.VERIFIED
    wait_for(verified, 120, "the export")
    worker.kill()
    with scope(study=reg.study):
        return reg, Recording.objects.get(pk=recording.pk).episode


@pytest.mark.outage
def test_postgresql_restarted_mid_release_is_retried_and_completes_once(make_registry, make_capture, make_user,
                                                                        tmp_path, settings):
    _needs()
    version, cluster = _cluster()
    settings.CERES_RELEASE_LEASE_SECONDS = 1
    worker = ForkedWorker(queue=f"ceres-drill-{uuid.uuid4().hex[:12]}", folder=tmp_path)
    try:
        reg, episode = _verified_episode(make_registry, make_capture, worker)
        second = make_user(f"{reg.study.code}-ethics2", reg.study, ["ethics_officer"])
        with scope(study=reg.study):
            made = release_requests.create_request(reg.coordinator, reg.study, episodes=[episode], purpose="drill")
            gate.inspect_request(made)
            release_requests.submit(reg.coordinator, made)
            for officer in (reg.ethics, second):
                approve(officer, made, manifest_sha256=made.manifest_sha256)
        go = tmp_path / "go"
        worker.start(stop_at=5, resume_on=go)  # half-way through the copy
        worker.send("releases.publish_release", made.pk)
        worker.wait_stopped()
        connections.close_all()
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "restart"], check=True,
                       capture_output=True, timeout=120)
        go.write_text("")  # the worker goes on: its next query meets a new server

        def released():
            try:
                with scope(study=reg.study):
                    return ReleaseRequest.objects.get(pk=made.pk).state == ReleaseRequest.State.RELEASED
            except Exception:  # the server still starting
                connections.close_all()
                return False
        wait_for(released, 180, "the release after the restart")
        with scope(study=reg.study):
            made.refresh_from_db()
            assert events("release.published", made) == 1 and events("release.signed", made) == 1
            release = made.release
        assert release.objects_copied == release.objects_total
        assert len(storage.walk(storages["releases"], made.prefix)) == release.objects_total
        log = (tmp_path / f"worker-{worker.queue}.log").read_text()
        assert "Retry" in log or "retry" in log  # the interrupted attempt was retried, not given up
    finally:
        worker.kill()
        connections.close_all()


def test_the_broker_restarted_with_tasks_queued_loses_nothing(make_registry, make_capture, tmp_path):
    """A private Redis keeping its data on disk (append-only file, fsync always), SIGKILLed and started again while
    exports wait in its queue with no worker: once it is back, a worker exports every one of them."""
    _needs(rabbit=False)
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server")
    port = 20000 + os.getpid() % 10000
    data = tmp_path / "redis"
    data.mkdir()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--appendonly", "yes",
               "--appendfsync", "always", "--save", "", "--daemonize", "no"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = ForkedWorker(queue=f"ceres-drill-{uuid.uuid4().hex[:12]}", folder=tmp_path,
                          broker=f"redis://127.0.0.1:{port}/0")
    try:
        _wait_redis(port)
        reg = make_registry()
        with scope(study=reg.study):
            recordings = [ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), seconds=1.0,
                                                                               width=32, height=24))
                          for _ in range(3)]
        for recording in recordings:
            worker.send("recordings.export_recording", recording.pk)
        server.kill()  # SIGKILL: no chance to write anything more; the append-only file holds what was queued
        server.wait(30)
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_redis(port)
        worker.start()

        def exported():
            with scope(study=reg.study):
                return Recording.objects.filter(pk__in=[r.pk for r in recordings],
                                                state=Recording.State.VERIFIED).count() == len(recordings)
        wait_for(exported, 180, "every queued export after the broker's restart")
        with scope(study=reg.study):
            for recording in Recording.objects.filter(pk__in=[r.pk for r in recordings]):
                assert events("recording.exported", recording) == 1
    finally:
        worker.kill()
        server.terminate()
        server.wait(30)


def _wait_redis(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if answer.stdout.strip() == "PONG":
            return
        time.sleep(0.1)
    raise AssertionError(f"the drill's Redis on port {port} did not answer")


