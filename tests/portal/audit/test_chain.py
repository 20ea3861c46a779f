import base64
import hashlib
import hmac
import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from portal.audit.models import AppendOnlyError, AuditEvent
from portal.audit.services import ChainBreak, record, verify_chain
from tests.portal.audit.tamper import raw as _raw

REPO = Path(__file__).resolve().parents[3]


def _write_events(study, n=5):
    for i in range(n):
        record("tester", "test.event", study, before={"i": i}, after={"i": i + 1, "note": "ünïcode"})


@pytest.fixture
def study(make_study):
    return make_study("alpha")


def test_chain_links_and_verifies(study):
    _write_events(study)
    events = list(AuditEvent.objects.order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].prev_hash == "0" * 64
    for previous, event in itertools.pairwise(events):
        assert event.prev_hash == previous.hash
    for event in events:
        # Computed here from the stored columns, not by the model: HMAC-SHA256 with the audit key over the
        # canonical JSON (sorted keys, compact, UTF-8) of every field but the hash.
        fields = {"seq": event.seq, "created_at": event.created_at.isoformat(timespec="microseconds"),
                  "actor_id": event.actor_id, "actor_label": event.actor_label, "action": event.action,
                  "study_id": event.study_id, "target_type": event.target_type, "target_id": event.target_id,
                  "target_label": event.target_label, "before": event.before, "after": event.after,
                  "prev_hash": event.prev_hash, "hash_version": 2}
        payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        assert event.hash_version == 2
        assert event.hash == hmac.new(settings.CERES_AUDIT_KEY, payload, hashlib.sha256).hexdigest()
        assert event.hash != hashlib.sha256(payload).hexdigest()
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert out.getvalue() == (f"audit chain intact: {len(events)} events; no signed checkpoint in storage yet, so "
                              "deleted newest events would not show\n")


def test_orm_refuses_update_and_delete(study):
    _write_events(study, 1)
    event = AuditEvent.objects.last()
    event.action = "forged"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(action="forged")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()


def test_raw_edit_is_named_by_audit_verify(study):
    _write_events(study)
    victim = AuditEvent.objects.get(seq=3)
    _raw("UPDATE audit_auditevent SET actor_label = %s WHERE id = %s", ["someone-else", victim.pk])
    with pytest.raises(CommandError, match=rf"seq=3 \(id={victim.pk}\): content does not match its hash"):
        call_command("audit_verify")


def test_raw_edit_with_a_recomputed_hash_is_named_at_the_next_event(study):
    """An edit whose own hash was recomputed (even with the audit key) passes its own check; the next event's
    link gives it away."""
    _write_events(study)
    victim = AuditEvent.objects.get(seq=3)
    follower = AuditEvent.objects.get(seq=4)
    victim.actor_label = "someone-else"
    _raw("UPDATE audit_auditevent SET actor_label = %s, hash = %s WHERE id = %s",
         [victim.actor_label, victim.compute_hash(), victim.pk])
    assert verify_chain() == (3, ChainBreak(4, follower.pk, "prev_hash does not match the previous event's hash"))
    with pytest.raises(CommandError, match=rf"seq=4 \(id={follower.pk}\): prev_hash does not match .* "
                                           r"\(3 events before it are intact\)"):
        call_command("audit_verify")


def test_relinking_the_next_event_moves_the_break_to_its_own_hash(study):
    """Rewriting the follower's link to the forged hash changes the follower's content: its hash names it."""
    _write_events(study)
    victim = AuditEvent.objects.get(seq=3)
    follower = AuditEvent.objects.get(seq=4)
    victim.actor_label = "someone-else"
    forged = victim.compute_hash()
    _raw("UPDATE audit_auditevent SET actor_label = %s, hash = %s WHERE id = %s",
         [victim.actor_label, forged, victim.pk])
    _raw("UPDATE audit_auditevent SET prev_hash = %s WHERE id = %s", [forged, follower.pk])
    assert verify_chain() == (3, ChainBreak(4, follower.pk, "content does not match its hash (edited, or re-hashed "
                                                            "without the audit key)"))


def test_a_changed_sequence_number_is_named(study):
    _write_events(study)
    victim = AuditEvent.objects.order_by("seq").last()
    _raw("UPDATE audit_auditevent SET seq = %s WHERE id = %s", [victim.seq + 2, victim.pk])
    expected = f"expected seq={victim.seq}: an event is missing"
    assert verify_chain() == (victim.seq - 1, ChainBreak(victim.seq + 2, victim.pk, expected))


def test_raw_delete_is_named_by_audit_verify(study):
    _write_events(study)
    victim = AuditEvent.objects.get(seq=2)
    follower = AuditEvent.objects.get(seq=3)
    _raw("DELETE FROM audit_auditevent WHERE id = %s", [victim.pk])
    with pytest.raises(CommandError, match=rf"seq=3 \(id={follower.pk}\): expected seq=2"):
        call_command("audit_verify")


def test_rolled_back_event_leaves_the_chain_whole(study):
    _write_events(study, 2)
    with pytest.raises(RuntimeError), transaction.atomic():
        record("tester", "test.event", study)
        raise RuntimeError("abort")
    _write_events(study, 2)
    assert verify_chain() == (AuditEvent.objects.count(), None)


def test_the_database_refuses_raw_update_and_delete(study):
    """The trigger, for every client of the database: on PostgreSQL and on SQLite alike."""
    _write_events(study, 1)
    for sql in ("UPDATE audit_auditevent SET action = 'x'", "DELETE FROM audit_auditevent"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql)


WRITER = """
import django, sys
django.setup()
from portal.audit.services import record
for i in range(int(sys.argv[1])):
    record(f"writer-{sys.argv[2]}", "test.concurrent", None, after={"i": i})
"""


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_processes_writing_at_once_leave_one_chain():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (set DATABASE_URL)")
    database = connection.settings_dict
    host = f"{database['HOST'] or '127.0.0.1'}:{database['PORT'] or 5432}"
    url = f"postgres://{database['USER']}@{host}/{database['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "portal.settings",
           "CERES_AUDIT_KEY": base64.b64encode(settings.CERES_AUDIT_KEY).decode()}  # the same key as here
    per_writer = 150
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(per_writer), str(n)], cwd=REPO, env=env)
        for n in range(2)
    ]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    count, broken = verify_chain()
    assert broken is None
    assert count == 2 * per_writer
    labels = set(AuditEvent.objects.values_list("actor_label", flat=True))
    assert labels == {"writer-0", "writer-1"}
