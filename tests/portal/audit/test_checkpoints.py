"""Signed checkpoints of the chain's head in the releases storage: what they hold, that the published public key
alone checks them, that a changed one is refused, that the newest is found cheaply, and that the writer never
signs a head that does not extend the last checkpoint."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command
from django.core.management.base import CommandError

from portal.audit import checkpoints, tasks
from portal.audit.checkpoints import CheckpointProblem
from portal.audit.exceptions import CheckpointRefused
from portal.audit.models import AuditCheckpoint, AuditEvent
from portal.audit.services import record, write_checkpoint
from portal.core import signing, storage
from tests.portal.audit.tamper import raw

pytestmark = pytest.mark.django_db


def _write(count: int) -> AuditEvent:
    for i in range(count):
        record("tester", "test.event", None, after={"i": i})
    return AuditEvent.objects.order_by("-seq").first()


def _stored(name: str) -> dict:
    with storage.releases().open(name, "rb") as stored:
        return json.loads(stored.read())


def _replace(name: str, document: dict) -> None:
    storage.put(storage.releases(), name, io.BytesIO(json.dumps(document).encode()))


def _signed_bytes(document: dict) -> bytes:
    """What the signature covers, written here from the format in docs/architecture.md, not by the portal."""
    signed = {key: document[key] for key in ("schema", "version", "checkpoint")}
    return json.dumps(signed, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_checkpoint_names_the_head_and_verifies_with_the_published_public_key(client):
    head = _write(4)
    at = datetime(2026, 11, 30, 21, 15, 7, 123456, tzinfo=UTC)
    made = write_checkpoint(now=at)
    prefix = checkpoints.prefix()
    assert made.name == f"{prefix}2026-11/20261130T211507.123456Z-{head.seq:012d}.json"
    assert storage.walk(storage.releases(), prefix) == [made.name]
    document = _stored(made.name)
    assert document["schema"] == "ceres-audit-checkpoint" and document["version"] == 1
    assert document["checkpoint"] == {"seq": 4, "hash": head.hash, "count": 4, "keyed_from": 1,
                                      "at": "2026-11-30T21:15:07.123456Z"}

    pem = client.get("/.well-known/ceres-release-key").content
    public = serialization.load_pem_public_key(pem)
    public.verify(base64.b64decode(document["signature"]), _signed_bytes(document))  # raises if it does not match
    raw_key = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert document["key_fingerprint"] == hashlib.sha256(raw_key).hexdigest()

    assert checkpoints.latest(public) == checkpoints.Checkpoint(4, head.hash, 4, 1, at, made.name)
    row = AuditCheckpoint.objects.get()
    assert (row.seq, row.hash, row.event_count, row.keyed_from, row.created_at, row.restart_reason) == \
        (4, head.hash, 4, 1, at, "")


@pytest.mark.parametrize("change", ["seq", "hash", "count", "signature", "another-key"])
def test_a_changed_checkpoint_is_refused(change):
    _write(3)
    made = write_checkpoint()
    document = _stored(made.name)
    if change == "seq":  # moved back, to hide events deleted after it
        document["checkpoint"]["seq"] = 2
    elif change == "hash":
        document["checkpoint"]["hash"] = "0" * 64
    elif change == "count":
        document["checkpoint"]["count"] = 2
    elif change == "signature":
        signature = bytearray(base64.b64decode(document["signature"]))
        signature[0] ^= 1
        document["signature"] = base64.b64encode(bytes(signature)).decode()
    else:  # a valid signature, of a key that is not the portal's
        document["checkpoint"]["seq"] = 2
        other = Ed25519PrivateKey.generate()
        document["signature"] = base64.b64encode(other.sign(_signed_bytes(document))).decode()
    _replace(made.name, document)
    with pytest.raises(CheckpointProblem, match="the signature does not match it and the public key"):
        checkpoints.latest(signing.public_key())
    _write(1)
    with pytest.raises(CheckpointRefused, match="the signature does not match"):
        write_checkpoint()
    assert checkpoints.names() == [made.name]


def test_something_else_under_the_prefix_is_not_a_checkpoint():
    _write(1)
    made = write_checkpoint()
    _replace(made.name, {"schema": "ceres-release-manifest", "version": 1})
    with pytest.raises(CheckpointProblem, match="is not an audit checkpoint"):
        checkpoints.latest(signing.public_key())


def test_the_newest_checkpoint_is_found_in_the_newest_months_folder(monkeypatch):
    times = [datetime(2026, 9, 30, 12, 0, tzinfo=UTC), datetime(2026, 10, 31, 23, 59, 59, 999999, tzinfo=UTC),
             datetime(2026, 11, 1, 0, 0, 0, 1, tzinfo=UTC), datetime(2026, 11, 1, 0, 0, 0, 2, tzinfo=UTC)]
    made = []
    for at in times:
        _write(2)
        made.append(write_checkpoint(now=at).name)
    assert checkpoints.names() == made[::-1]
    assert [name.split("/")[-2] for name in made] == ["2026-09", "2026-10", "2026-11", "2026-11"]
    listed = []
    releases = storage.releases()
    real = releases.listdir
    monkeypatch.setattr(releases, "listdir", lambda folder: listed.append(folder) or real(folder))
    newest = checkpoints.latest(signing.public_key())
    assert (newest.seq, newest.name) == (8, made[-1])
    assert listed == [checkpoints.prefix().rstrip("/"), f"{checkpoints.prefix()}2026-11"]


def _tail_deleted():
    raw("DELETE FROM audit_auditevent WHERE seq > 3")
    return "the chain ends at seq 3, but the checkpoint of .* names seq 5: the newest 2 events are missing"


def _tail_replaced():
    raw("DELETE FROM audit_auditevent WHERE seq > 3")
    _write(3)  # new events, correctly keyed, where the deleted ones were
    return "the event at seq 5 does not have the hash the checkpoint of .* signed: the history has been re-written"


def _edited_since():
    _write(3)
    raw("UPDATE audit_auditevent SET actor_label = 'someone-else' WHERE seq = 7")
    return r"seq=7 \(id=\d+\): content does not match its hash .* \(since the checkpoint of"


@pytest.mark.parametrize("tamper", [_tail_deleted, _tail_replaced, _edited_since],
                         ids=["tail-deleted", "tail-replaced", "edited-since"])
def test_the_writer_signs_only_a_head_that_extends_the_last_checkpoint(tamper):
    _write(5)
    first = write_checkpoint()
    expected = tamper()
    with pytest.raises(CheckpointRefused, match=expected):
        write_checkpoint()
    assert checkpoints.names() == [first.name]
    assert list(AuditCheckpoint.objects.values_list("seq", flat=True)) == [5]


def test_the_next_checkpoint_carries_the_count_and_the_first_keyed_seq_on():
    _write(3)
    write_checkpoint(now=datetime(2026, 11, 1, tzinfo=UTC))
    head = _write(2)
    second = write_checkpoint(now=datetime(2026, 11, 2, tzinfo=UTC))
    assert _stored(second.name)["checkpoint"] | {"at": None} == {"seq": 5, "hash": head.hash, "count": 5,
                                                                  "keyed_from": 1, "at": None}


def test_a_restart_starts_afresh_and_is_an_audit_event():
    """After a restore from an older backup the chain is shorter than the checkpoint: the writer refuses until
    someone restarts the checkpoints, which is recorded with the reason and the checkpoint left behind."""
    _write(5)
    left = write_checkpoint(now=datetime(2026, 11, 1, tzinfo=UTC))
    raw("DELETE FROM audit_auditevent WHERE seq > 3")
    with pytest.raises(CheckpointRefused):
        write_checkpoint()
    out = io.StringIO()
    call_command("audit_checkpoint", "--restart", "restored last night's backup", stdout=out)
    event = AuditEvent.objects.get(seq=4)
    assert (event.action, event.actor_label, event.after) == \
        ("audit.checkpoint_restarted", "manage.py audit_checkpoint", {"reason": "restored last night's backup"})
    assert (event.before["seq"], event.before["hash"], event.before["name"]) == (5, left.hash, left.name)
    restarted = AuditCheckpoint.objects.order_by("-created_at").first()
    assert (restarted.seq, restarted.restart_reason) == (4, "restored last night's backup")
    assert out.getvalue() == f"checkpoint of seq 4 (4 events) written to {restarted.name}\n"
    _write(1)
    assert write_checkpoint().seq == 5  # the next one extends the restarted checkpoint


def test_the_command_refuses_with_the_reason():
    _write(2)
    write_checkpoint()
    raw("DELETE FROM audit_auditevent WHERE seq = 2")
    with pytest.raises(CommandError, match="names seq 2: the newest event is missing"):
        call_command("audit_checkpoint")


def test_the_beat_task_writes_a_checkpoint_and_logs_a_refusal(caplog):
    assert tasks.write_checkpoint() is None  # nothing to sign yet
    _write(2)
    assert tasks.write_checkpoint() == 2
    raw("DELETE FROM audit_auditevent WHERE seq = 2")
    with caplog.at_level(logging.ERROR, logger="portal.audit.tasks"), pytest.raises(CheckpointRefused):
        tasks.write_checkpoint()
    assert "audit checkpoint refused: the chain ends at seq 1" in caplog.text


def test_beat_writes_checkpoints_every_configured_minutes_and_verifies_daily_on_the_heavy_queue(tmp_path):
    script = ("from django.conf import settings as s; b = s.CELERY_BEAT_SCHEDULE; "
              "print(b['audit-write-checkpoint'], b['audit-verify-chain'], "
              "s.CELERY_TASK_ROUTES['audit.verify_chain']['queue'] == s.CERES_HEAVY_QUEUE)")
    result = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[3], timeout=120,
                            env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings",
                                 "CERES_DATA_DIR": str(tmp_path), "CERES_AUDIT_CHECKPOINT_MINUTES": "15"})
    assert result.stdout.strip().splitlines()[-1] == ("{'task': 'audit.write_checkpoint', 'schedule': 900.0} "
                                     "{'task': 'audit.verify_chain', 'schedule': 86400.0} True"), result.stderr
