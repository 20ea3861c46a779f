"""A database-only attacker against the audit log, and ``audit_verify`` naming the first seq each attack affects.

The attacks are made the way the database in use allows its owner (``tamper.py``): on PostgreSQL the trigger is
disabled around the raw SQL and the table emptied with TRUNCATE, which the row trigger does not stop; on SQLite
the triggers are dropped and made again around it. So each test runs on the embedded defaults (SQLite) and,
unchanged, on PostgreSQL in CI, where nothing here skips.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from portal.audit import services
from portal.audit.models import HASH_KEYED, HASH_PLAIN, AuditEvent, ChainVerification
from portal.audit.services import record, write_checkpoint
from tests.portal.audit.tamper import raw, rehash_from, truncate

pytestmark = pytest.mark.django_db
NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
EVENING = datetime(2026, 11, 30, 18, 0, tzinfo=UTC)
ONLY_THE_CHECKPOINT = "link and hash right: only the checkpoint shows it)"


def _write(count: int) -> None:
    for i in range(count):
        record("tester", "test.event", None, after={"i": i})


def _refused() -> str:
    with pytest.raises(CommandError) as refused:
        call_command("audit_verify")
    assert ChainVerification.objects.order_by("-started_at").first().ok is False
    return str(refused.value)


def _forge(event: AuditEvent) -> None:
    event.actor_label = "someone-else"


def test_deleting_the_newest_events_is_named_at_the_first_one_missing():
    """The issue's own case: 100 events, a checkpoint, then DELETE ... WHERE seq > 97 left an intact chain."""
    _write(100)
    write_checkpoint(now=NOON)
    raw("DELETE FROM audit_auditevent WHERE seq > 97")
    assert _refused() == ("audit chain broken at seq=98: the newest 3 events are missing: the chain ends at seq 97, "
                          "the checkpoint of 2026-11-30 12:00:00 UTC names seq 100 (the 97 events there "
                          f"{ONLY_THE_CHECKPOINT}")
    assert ChainVerification.objects.get().first_seq == 98


def test_emptying_the_table_is_named_at_seq_1():
    _write(5)
    write_checkpoint(now=NOON)
    truncate()
    assert not AuditEvent.objects.exists()
    assert _refused() == ("audit chain broken at seq=1: the table is empty (truncated), but the checkpoint of "
                          "2026-11-30 12:00:00 UTC names seq 5")


@pytest.mark.parametrize("version", [HASH_KEYED, HASH_PLAIN], ids=["kept-version-2", "claimed-version-1"])
def test_an_edit_with_the_history_rehashed_after_it_is_named_at_the_edit(version):
    """Event 50 edited, it and all later ones re-hashed and relinked with the public algorithm: without the key
    the first forged event gives itself away, whatever version it claims."""
    _write(60)
    write_checkpoint(now=NOON)
    _write(5)
    rehash_from(50, version=version, change=_forge)
    event = AuditEvent.objects.get(seq=50)
    assert event.actor_label == "someone-else"
    reason = ("content does not match its hash (edited, or re-hashed without the audit key)" if version == HASH_KEYED
              else "an unkeyed (version 1) hash after a keyed one: re-hashed with the public algorithm")
    assert _refused() == f"audit chain broken at event seq=50 (id={event.pk}): {reason} (49 events before it are " \
                         "intact)"


def test_a_whole_chain_rehashed_as_unkeyed_is_named_at_the_first_keyed_seq_of_the_checkpoint(monkeypatch):
    """A chain begun before the keyed hashes (events 1-4 unkeyed). The attacker edits event 3 and re-hashes it and
    everything after it as unkeyed, so no keyed event is left to break; the signed checkpoint says the chain is
    keyed from seq 5 on, so seq 5 is where it breaks (seq 3 cannot be told from the public algorithm)."""
    monkeypatch.setattr(services, "HASH_VERSION", HASH_PLAIN)
    _write(4)
    monkeypatch.undo()
    _write(4)
    assert write_checkpoint(now=NOON).keyed_from == 5
    rehash_from(3, version=HASH_PLAIN, change=_forge)
    assert set(AuditEvent.objects.values_list("hash_version", flat=True)) == {HASH_PLAIN}
    assert _refused() == (f"audit chain broken at event seq=5 (id={AuditEvent.objects.get(seq=5).pk}): an unkeyed "
                          "(version 1) hash where the chain is keyed from seq=5 on: re-hashed with the public "
                          "algorithm (4 events before it are intact)")


def test_a_tail_replaced_by_new_events_is_named_after_the_newest_checkpoint_that_still_matches():
    """Events deleted from the end, then the portal appended new (rightly keyed) ones in their place: the chain
    walks clean, but the newest checkpoint's seq now holds another event; the one before it still matches."""
    _write(10)
    write_checkpoint(now=NOON)
    _write(10)
    write_checkpoint(now=EVENING)
    raw("DELETE FROM audit_auditevent WHERE seq > 15")
    _write(8)
    assert _refused() == ("audit chain broken at seq=11: the event at seq 20 does not have the hash the checkpoint of "
                          "2026-11-30 18:00:00 UTC signed: the history has been re-written after seq 10, which still "
                          f"has the hash the checkpoint of 2026-11-30 12:00:00 UTC signed (the 23 events there "
                          f"{ONLY_THE_CHECKPOINT}")


def test_an_unkeyed_history_rehashed_under_the_checkpoint_is_named_by_it(monkeypatch):
    """A chain with no keyed event at all (checkpointed before the upgrade's first keyed event): the public
    algorithm re-makes every hash, and only the checkpoints show it, bounding where it starts."""
    monkeypatch.setattr(services, "HASH_VERSION", HASH_PLAIN)
    _write(20)
    write_checkpoint(now=NOON)
    _write(20)
    write_checkpoint(now=EVENING)
    rehash_from(30, version=HASH_PLAIN, change=_forge)
    assert _refused().startswith("audit chain broken at seq=21: the event at seq 40 does not have the hash the "
                                 "checkpoint of 2026-11-30 18:00:00 UTC signed: the history has been re-written after "
                                 "seq 20")


def test_with_no_checkpoint_left_that_matches_the_first_seq_is_1(monkeypatch):
    monkeypatch.setattr(services, "HASH_VERSION", HASH_PLAIN)
    _write(6)
    write_checkpoint(now=NOON)
    rehash_from(2, version=HASH_PLAIN, change=_forge)
    assert _refused().startswith("audit chain broken at seq=1: the event at seq 6 does not have the hash the "
                                 "checkpoint of 2026-11-30 12:00:00 UTC signed: the history may be re-written from "
                                 "seq 1 on: no earlier checkpoint still matches")
