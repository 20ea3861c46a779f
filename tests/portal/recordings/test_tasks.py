"""The export task's error handling, run in-process (``apply``): storage errors retry, bugs fail visibly."""

from __future__ import annotations

import pytest
from botocore.exceptions import EndpointConnectionError
from django_scopes import scope

from portal.core.errors import LeaseBusy
from portal.recordings import tasks
from portal.recordings.models import Recording
from portal.recordings.services import export, ingest
from portal.recordings.services.ingest import ingest_path, receive_upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(reg, make_capture):
    with scope(study=reg.study):
        return ingest_path(reg.coordinator, reg.study, make_capture(reg.claims()))


def test_storage_errors_are_retried_with_backoff_then_fail(queued, monkeypatch):
    calls = []

    def unreachable(recording_id):
        calls.append(recording_id)
        raise EndpointConnectionError(endpoint_url="http://s3.invalid")

    monkeypatch.setattr(export, "export_recording", unreachable)
    tasks.export_recording.apply(args=[queued.pk])
    queued.refresh_from_db()
    # The documented policy (docs/architecture.md): 12 retries, 2 s doubling to at most 300 s, then give up.
    assert len(calls) == 1 + 12
    assert queued.state == Recording.State.FAILED
    assert queued.reason == ('storage unavailable after retries: Could not connect to the endpoint URL: '
                             '"http://s3.invalid"')
    with scope(study=queued.study):
        retries = [m for m in queued.log.values_list("message", flat=True) if m.startswith("storage error")]
    assert retries == [f"storage error, retrying in {s} s: Could not connect to the endpoint URL: "
                       '"http://s3.invalid"' for s in (2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300)]


def test_a_transient_error_then_success(queued, monkeypatch):
    real = export.export_recording
    attempts = []

    def flaky(recording_id):
        attempts.append(recording_id)
        if len(attempts) == 1:
            raise ConnectionRefusedError("gateway down")
        return real(recording_id)

    monkeypatch.setattr(export, "export_recording", flaky)
    tasks.export_recording.apply(args=[queued.pk])
    queued.refresh_from_db()
    assert len(attempts) == 2 and queued.state == Recording.State.EXPORTED


def test_a_busy_lease_is_waited_for_not_given_up(queued, monkeypatch):
    """Another attempt holding the lease is no error: the task tries again once the lease has run out."""
    real = export.export_recording
    attempts = []

    def busy_then_free(recording_id):
        attempts.append(recording_id)
        if len(attempts) < 3:
            raise LeaseBusy("export", 30)
        return real(recording_id)

    monkeypatch.setattr(export, "export_recording", busy_then_free)
    tasks.export_recording.apply(args=[queued.pk])
    queued.refresh_from_db()
    assert len(attempts) == 3 and queued.state == Recording.State.EXPORTED
    with scope(study=queued.study):
        assert not [m for m in queued.log.values_list("message", flat=True) if m.startswith("storage error")]


def test_a_lease_busy_longer_than_the_retry_limit_is_still_waited_for(queued, monkeypatch):
    """Celery's max_retries=None means the task's own limit (12): a wait for a long-running attempt must not
    turn into a failure after 12 busy tries."""
    real = export.export_recording
    attempts = []

    def busy_for_long(recording_id):
        attempts.append(recording_id)
        if len(attempts) <= 12 + 3:
            raise LeaseBusy("export", 0)
        return real(recording_id)

    monkeypatch.setattr(export, "export_recording", busy_for_long)
    tasks.export_recording.apply(args=[queued.pk])
    queued.refresh_from_db()
    assert len(attempts) == 12 + 4 and queued.state == Recording.State.EXPORTED


def test_an_unexpected_error_fails_the_export_visibly(queued, monkeypatch):
    def broken(recording_id):
        raise KeyError("rows")

    monkeypatch.setattr(export, "export_recording", broken)
    result = tasks.export_recording.apply(args=[queued.pk])
    assert isinstance(result.result, KeyError)
    queued.refresh_from_db()
    assert queued.state == Recording.State.FAILED and queued.reason == "internal error: KeyError('rows')"


def test_an_unexpected_ingest_error_rejects_the_upload_visibly(reg, monkeypatch):
    import io

    with scope(study=reg.study):
        recording = receive_upload(reg.coordinator, reg.study, io.BytesIO(b"PK"), name="x.zip", via="api")

    def broken(recording):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ingest, "ingest_received", broken)
    tasks.ingest_recording.apply(args=[recording.pk])
    recording.refresh_from_db()
    assert recording.state == Recording.State.REJECTED
    assert recording.reason == "internal error: RuntimeError('disk on fire')"


def test_beat_schedule_names_registered_tasks(settings):
    from portal.celery import app

    app.loader.import_default_modules()
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"recordings.poll_inbox", "recordings.purge_expired_audio", "recordings.reverify_shards",
            "audit.write_checkpoint", "audit.verify_chain"} <= names
    assert names <= set(app.tasks)
