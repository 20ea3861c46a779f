"""The keyed chain: new events are HMAC-SHA256 with the audit key (version 2), events written before it stay
verifiable as plain SHA-256 (version 1), and what a database-only attacker can do with the public algorithm is
named at the event they changed."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from portal.audit import services
from portal.audit.models import HASH_KEYED, HASH_PLAIN, AuditEvent
from portal.audit.services import ChainBreak, Entry, record, record_many, verify_chain
from tests.portal.audit.tamper import public_hash, raw, rehash_from

REPO = Path(__file__).resolve().parents[3]
REHASHED = "an unkeyed (version 1) hash after a keyed one: re-hashed with the public algorithm"
EDITED = "content does not match its hash (edited, or re-hashed without the audit key)"

pytestmark = pytest.mark.django_db


def _write(count: int, *, start: int = 0) -> None:
    for i in range(start, start + count):
        record("tester", "test.event", None, after={"i": i})


def _id(seq: int) -> int:
    return AuditEvent.objects.get(seq=seq).pk


def test_record_and_record_many_write_keyed_events():
    _write(2)
    record_many([Entry("tester", "test.bulk", None, after={"i": i}) for i in range(3)])
    events = list(AuditEvent.objects.order_by("seq"))
    assert [e.hash_version for e in events] == [HASH_KEYED] * 5
    assert all(e.hash != public_hash(e) for e in events)  # not what anyone could compute without the key
    assert verify_chain() == (5, None)


def test_another_key_does_not_verify_the_chain(settings):
    _write(3)
    settings.CERES_AUDIT_KEY = bytes(32)
    assert verify_chain() == (0, ChainBreak(1, _id(1), EDITED))


def test_an_event_rehashed_with_plain_sha256_is_named():
    """The attacker edits event 3 and writes the public algorithm's hash for it, keeping version 2."""
    _write(5)
    victim = AuditEvent.objects.get(seq=3)
    victim.actor_label = "someone-else"
    raw("UPDATE audit_auditevent SET actor_label = %s, hash = %s WHERE id = %s",
        [victim.actor_label, public_hash(victim), victim.pk])
    assert verify_chain() == (2, ChainBreak(3, victim.pk, EDITED))


@pytest.mark.parametrize("version", [HASH_KEYED, HASH_PLAIN], ids=["kept-version-2", "claimed-version-1"])
def test_an_edit_with_the_rest_of_the_chain_rehashed_is_named_at_the_edit(version):
    """The whole attack: event 50 edited, it and every later event re-hashed and relinked with the public
    algorithm. Claiming version 2 fails the keyed hash; claiming version 1 puts an unkeyed event after keyed ones.
    Either way the break is at seq 50, not at the end."""
    _write(60)

    def forge(event):
        event.actor_label = "someone-else"

    rehash_from(50, version=version, change=forge)
    reason = EDITED if version == HASH_KEYED else REHASHED
    assert verify_chain() == (49, ChainBreak(50, _id(50), reason))


def test_unkeyed_events_written_before_the_keyed_chain_still_verify(monkeypatch):
    """A database from before the keyed chain: its events are version 1 (the migration says so), later ones
    version 2, and the chain runs across the change. A version-1 event is as strong as plain SHA-256: an edit
    re-hashed with the public algorithm is seen only at the first keyed event, whose link it breaks."""
    monkeypatch.setattr(services, "HASH_VERSION", HASH_PLAIN)
    _write(4)
    monkeypatch.undo()
    _write(3, start=4)
    assert [e.hash_version for e in AuditEvent.objects.order_by("seq")] == [1, 1, 1, 1, 2, 2, 2]
    assert all(e.hash == public_hash(e) for e in AuditEvent.objects.filter(hash_version=HASH_PLAIN))
    assert verify_chain() == (7, None)

    def forge(event):
        event.action = "test.forged"

    victim = AuditEvent.objects.get(seq=2)
    forge(victim)
    forged = public_hash(victim)
    raw("UPDATE audit_auditevent SET action = %s, hash = %s WHERE id = %s", [victim.action, forged, victim.pk])
    for seq in (3, 4):  # relinked and re-hashed up to the last unkeyed event
        event = AuditEvent.objects.get(seq=seq)
        event.prev_hash = forged
        forged = public_hash(event)
        raw("UPDATE audit_auditevent SET prev_hash = %s, hash = %s WHERE id = %s", [event.prev_hash, forged, event.pk])
    raw("UPDATE audit_auditevent SET prev_hash = %s WHERE seq = 5", [forged])
    assert verify_chain() == (4, ChainBreak(5, _id(5), EDITED))


def test_the_key_is_read_strictly_and_made_once_with_mode_0600(tmp_path):
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", "CERES_DATA_DIR": str(tmp_path)}

    def manage(*args, **env):
        return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env={**base, **env},
                              capture_output=True, text=True, timeout=120)

    short = manage("check", CERES_AUDIT_KEY=base64.b64encode(bytes(16)).decode())
    assert short.returncode != 0 and "CERES_AUDIT_KEY must be base64 of 32 bytes, not 16 bytes" in short.stderr
    assert manage("check").returncode == 0
    kept = tmp_path / "audit-key"
    assert kept.stat().st_mode & 0o777 == 0o600 and len(base64.b64decode(kept.read_text())) == 32
    first = kept.read_text()
    assert manage("check").returncode == 0 and kept.read_text() == first

