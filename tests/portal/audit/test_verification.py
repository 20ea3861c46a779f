"""A full verification compares the walked chain with the newest signed checkpoint, says so, exits non-zero on any
problem, and is recorded (time, events, result) for the audit view, by the command and by beat's daily task."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from portal.audit import tasks
from portal.audit.exceptions import CheckpointRefused
from portal.audit.models import AppendOnlyError, AuditCheckpoint, AuditEvent, ChainVerification
from portal.audit.services import ChainBreak, check_chain, record, write_checkpoint
from portal.core import storage
from tests.portal.audit.tamper import raw, raw_checkpoint_row_delete

pytestmark = pytest.mark.django_db
NOON = datetime(2026, 11, 30, 12, 0, 0, 250000, tzinfo=UTC)


def _write(count: int) -> None:
    for i in range(count):
        record("tester", "test.event", None, after={"i": i})


def test_an_intact_chain_names_the_checkpoint_it_extends():
    _write(3)
    write_checkpoint(now=NOON)
    _write(2)  # events after the checkpoint are the chain's growth, not a problem
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue() == ("audit chain intact: 5 events; it extends the signed checkpoint of 2026-11-30 12:00:00 "
                              "UTC (seq 3)\n")
    run = ChainVerification.objects.get()
    assert (run.via, run.events, run.ok, run.first_seq, run.problem, run.checkpoint_seq, run.checkpoint_at) == \
        ("command", 5, True, None, "", 3, NOON)
    assert run.started_at <= run.finished_at


def test_a_problem_exits_non_zero_and_is_recorded_with_its_first_seq():
    _write(4)
    write_checkpoint(now=NOON)
    raw("DELETE FROM audit_auditevent WHERE seq = 4")
    with pytest.raises(CommandError) as refused:
        call_command("audit_verify")
    assert str(refused.value) == ("audit chain broken at seq=4: the newest event is missing: the chain ends at seq 3, "
                                  "the checkpoint of 2026-11-30 12:00:00 UTC names seq 4 (the 3 events there link "
                                  "and hash right: only the checkpoint shows it)")
    run = ChainVerification.objects.get()
    assert (run.ok, run.events, run.first_seq, run.checkpoint_seq) == (False, 3, 4, 4)
    assert run.problem.startswith("audit chain broken at seq=4: the newest event is missing")


def test_a_checkpoint_that_does_not_verify_is_a_problem_without_a_seq():
    _write(2)
    made = write_checkpoint(now=NOON)
    with storage.releases().open(made.name, "rb") as stored:
        document = json.loads(stored.read())
    document["checkpoint"]["seq"] = 1
    storage.put(storage.releases(), made.name, io.BytesIO(json.dumps(document).encode()))
    report = check_chain()
    assert not report.ok and report.problem.seq is None and report.checkpoint is None
    assert str(report.problem).startswith("audit chain not verified: the newest signed checkpoint cannot be trusted: "
                                          f"{made.name}: the signature does not match it")
    with pytest.raises(CommandError, match="cannot be trusted"):
        call_command("audit_verify")


def test_a_break_in_the_chain_is_named_before_the_checkpoint_is_compared():
    _write(5)
    write_checkpoint(now=NOON)
    raw("UPDATE audit_auditevent SET actor_label = 'someone-else' WHERE seq = 2")
    raw("DELETE FROM audit_auditevent WHERE seq = 5")
    report = check_chain()
    assert (report.events, report.problem.seq) == (1, 2)
    assert "content does not match its hash" in report.problem.reason


def test_the_daily_task_records_each_run_and_logs_a_problem(caplog):
    _write(2)
    write_checkpoint(now=NOON)
    assert tasks.verify_chain() is True
    raw("UPDATE audit_auditevent SET hash_version = 1, hash = %s WHERE seq = 2", ["ab" * 32])
    with caplog.at_level(logging.ERROR, logger="portal.audit.tasks"):
        assert tasks.verify_chain() is False
    assert "audit chain broken at event seq=2" in caplog.text
    runs = list(ChainVerification.objects.order_by("started_at").values_list("via", "ok", "first_seq"))
    assert runs == [("task", True, None), ("task", False, 2)]


def test_the_stored_checkpoint_decides_not_the_database_note_of_it():
    """The attacker deletes the newest event and the database's note of the checkpoint too (which the ORM refuses,
    so raw): verification reads the signed object in storage."""
    _write(3)
    made = write_checkpoint(now=NOON)
    with pytest.raises(AppendOnlyError):
        AuditCheckpoint.objects.filter(pk=made.pk).delete()
    raw("DELETE FROM audit_auditevent WHERE seq = 3")
    raw_checkpoint_row_delete(made.pk)
    assert not AuditCheckpoint.objects.exists()
    assert check_chain().problem == ChainBreak(3, None, "the newest event is missing: the chain ends at seq 2, the "
                                                        "checkpoint of 2026-11-30 12:00:00 UTC names seq 3",
                                               by_checkpoint=True)


def _unreadable_time() -> str:
    """A value the database keeps in ``created_at`` that is no time the portal can read: any text on SQLite (whose
    columns take anything), ``infinity`` on PostgreSQL (a timestamp it accepts, beyond Python's datetime)."""
    from django.db import connection

    return "infinity" if connection.vendor == "postgresql" else "not a date"


@pytest.mark.parametrize("via", ["command", "task"])
def test_an_unreadable_field_is_a_named_break_and_a_recorded_failed_verification(via, caplog):
    """A database writer puts a value the portal cannot read into an event's timestamp: the verifier crashed
    (AttributeError) and recorded nothing, so the audit page kept showing the last "intact"."""
    _write(2)
    write_checkpoint(now=NOON)
    _write(2)
    assert tasks.verify_chain() is True
    raw("UPDATE audit_auditevent SET created_at = %s WHERE seq = 3", [_unreadable_time()])
    event_id = AuditEvent.objects.filter(seq=3).values_list("pk", flat=True).get()
    expected = f"audit chain broken at event seq=3 (id={event_id}): a field cannot be read: created_at"
    if via == "command":
        with pytest.raises(CommandError) as refused:
            call_command("audit_verify")
        assert str(refused.value).startswith(expected)
        assert str(refused.value).endswith("(2 events before it are intact)")
    else:
        with caplog.at_level(logging.ERROR, logger="portal.audit.tasks"):
            assert tasks.verify_chain() is False
        assert expected in caplog.text
    latest = ChainVerification.objects.order_by("-started_at", "-pk").first()
    assert (latest.ok, latest.events, latest.first_seq) == (False, 2, 3)
    assert latest.problem.startswith(expected)
    with pytest.raises(CheckpointRefused, match=r"audit chain broken at event seq=3 .*a field cannot be read: "
                                                r"created_at"):  # nor does a checkpoint vouch for it
        write_checkpoint()
