"""The newest events are checkpointed seconds after they commit, not at the next hourly checkpoint: each commit of
audit events sends one checkpoint task (debounced: one pending at a time) to start
``CERES_AUDIT_CHECKPOINT_DELAY_SECONDS`` later, and ``migrate`` writes one too. So deleting events older than that
window, or emptying the log of a portal that just started, is named by ``audit_verify``.

The task is sent as the portal sends it; with no broker here, the test runs it in-process as a worker would."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from portal.audit import tasks
from portal.audit.models import AuditCheckpoint, AuditEvent
from portal.audit.services import record
from portal.core import queue
from portal.fixity.models import FixityRun
from tests.portal.audit.tamper import raw, truncate

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, tuple, float]]:
    """The delayed tasks the code under test sent (name, args, countdown); nothing reaches a broker."""
    sent: list[tuple[str, tuple, float]] = []
    monkeypatch.setattr(queue, "send_later", lambda name, *args, countdown, expires=None:
                        sent.append((name, args, countdown)))
    return sent


def _commit(count: int, capture) -> None:
    with capture(execute=True), transaction.atomic():
        for i in range(count):
            record("tester", "test.event", None, after={"i": i})


def _refused() -> str:
    with pytest.raises(CommandError) as refused:
        call_command("audit_verify")
    return str(refused.value)


def test_deleting_an_event_older_than_the_delay_is_named(sent, settings, django_capture_on_commit_callbacks):
    """The issue's case: no checkpoint until beat's hourly one, so the newest events could be cut unseen for an
    hour (and a fresh install's whole log). Now a checkpoint task follows the commit."""
    settings.CERES_AUDIT_CHECKPOINT_DELAY_SECONDS = 7
    _commit(3, django_capture_on_commit_callbacks)
    assert sent == [("audit.write_checkpoint", (), 7)]
    _commit(2, django_capture_on_commit_callbacks)  # one is pending: not sent again
    assert sent == [("audit.write_checkpoint", (), 7)]
    assert tasks.write_checkpoint() == 5  # the worker runs it 7 seconds on
    raw("DELETE FROM audit_auditevent WHERE seq = 5")
    assert _refused().startswith("audit chain broken at seq=5: the newest event is missing: the chain ends at seq 4")


def test_events_committed_after_the_task_started_send_the_next_one(sent, django_capture_on_commit_callbacks):
    _commit(1, django_capture_on_commit_callbacks)
    assert tasks.write_checkpoint() == 1
    _commit(2, django_capture_on_commit_callbacks)
    assert [name for name, _, _ in sent] == ["audit.write_checkpoint"] * 2
    assert tasks.write_checkpoint() == 3
    raw("DELETE FROM audit_auditevent WHERE seq > 1")
    assert _refused().startswith("audit chain broken at seq=2: the newest 2 events are missing")


def test_a_rolled_back_event_sends_nothing(sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        record("tester", "test.event", None)
        raise RuntimeError("rolled back")
    assert sent == []


def test_migrate_writes_a_checkpoint_so_a_fresh_log_cannot_be_emptied_unseen(sent):
    """Events written before any checkpoint (a fresh install, an upgrade): ``migrate`` signs the head, so emptying
    the table is named at seq 1 rather than passing as an empty, intact log."""
    for i in range(3):
        record("tester", "test.event", None, after={"i": i})
    assert not AuditCheckpoint.objects.exists()
    out = io.StringIO()
    call_command("migrate", verbosity=1, stdout=out)
    made = AuditCheckpoint.objects.get()
    assert (made.seq, made.event_count) == (3, 3)
    assert f"audit checkpoint of seq 3 written to {made.name}" in out.getvalue()
    truncate()
    assert _refused().startswith("audit chain broken at seq=1: the table is empty (truncated), but the checkpoint of ")


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_checkpoints_the_events_it_commits(settings, tmp_path):
    """PostgreSQL, Redis and a worker process: a task that records events (a fixity run) is followed, with no beat,
    by the checkpoint task the worker sent itself; the newest event deleted after that is named."""
    from tests.portal.recordings.pipeline_worker import Worker, worker_env
    from tests.portal.recordings.test_worker_faults import wait_for

    worker = Worker(env=worker_env(settings, tmp_path / "data", f"ceres-audit-{tmp_path.name[-12:]}",
                                   CERES_AUDIT_CHECKPOINT_DELAY_SECONDS="1"), log=tmp_path / "worker.log")
    try:
        worker.start()
        worker.send("fixity.run_slice")
        wait_for(lambda: FixityRun.objects.filter(finished_at__isnull=False).exists(), 120, "the fixity run",
                 interval=0.2)
        head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first()
        assert head >= 2  # the run's start and end
        wait_for(lambda: AuditCheckpoint.objects.filter(seq=head).exists(), 120,
                 f"the worker's audit checkpoint of seq {head}", interval=0.2)
    finally:
        worker.kill()
    raw("DELETE FROM audit_auditevent WHERE seq = %s", [head])
    assert _refused().startswith(f"audit chain broken at seq={head}: the newest event is missing")
