"""The single entry point for audit events: ``record(actor, action, target, before, after)``."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import Model
from django.utils import timezone

from portal.audit.models import AuditEvent

GENESIS_HASH = "0" * 64
# Any fixed number: the key of the PostgreSQL advisory lock that serialises chain appends.
_CHAIN_LOCK_KEY = 0x43455245


def _normalise(value):
    """Round-trip through JSON so the hashed value equals what the database gives back."""
    if value is None:
        return None
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def _actor(actor) -> tuple[int | None, str]:
    if actor is None:
        return None, "system"
    if isinstance(actor, str):
        return None, actor
    if not getattr(actor, "is_authenticated", False):
        return None, "anonymous"
    return actor.pk, actor.get_username()


def _target(target) -> tuple[str, str, str, int | None]:
    if target is None:
        return "", "", "", None
    if isinstance(target, Model):
        label = f"{target._meta.app_label}.{target._meta.model_name}"
        study_id = getattr(target, "study_id", None)
        if study_id is None and label == "studies.study":
            study_id = target.pk
        return label, str(target.pk), str(target)[:255], study_id
    return type(target).__name__, "", str(target)[:255], None


def _lock_chain() -> tuple[int, str]:
    """Serialise appends until the caller's transaction ends; return the last event's ``seq`` and ``hash``.

    An advisory lock on PostgreSQL, the database write lock on SQLite; ``seq`` is unique as a last guard.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_CHAIN_LOCK_KEY])
    last = AuditEvent.objects.order_by("-seq").only("seq", "hash").first()
    return (last.seq, last.hash) if last else (0, GENESIS_HASH)


def _event(seq: int, prev_hash: str, actor, action: str, target, before, after, study) -> AuditEvent:
    actor_id, actor_label = _actor(actor)
    target_type, target_id, target_label, target_study = _target(target)
    event = AuditEvent(
        seq=seq,
        created_at=timezone.now(),
        actor_id=actor_id,
        actor_label=actor_label[:150],
        action=action,
        study_id=study.pk if study is not None else target_study,
        target_type=target_type,
        target_id=target_id,
        target_label=target_label,
        before=_normalise(before),
        after=_normalise(after),
        prev_hash=prev_hash,
    )
    event.hash = event.compute_hash()
    return event


def record(actor, action: str, target=None, *, before=None, after=None, study=None) -> AuditEvent:
    """Append one event to the chain, inside the caller's transaction.

    Appends are serialised (an advisory lock on PostgreSQL, the database write lock on SQLite),
    so two writers can never chain onto the same predecessor; ``seq`` is unique as a last guard.
    If the caller's transaction rolls back, its event goes with it and the chain stays whole.
    """
    with transaction.atomic():
        seq, prev_hash = _lock_chain()
        event = _event(seq + 1, prev_hash, actor, action, target, before, after, study)
        event.save()
    return event


@dataclass(frozen=True)
class Entry:
    """One event for ``record_many``: what ``record`` takes as arguments."""

    actor: Any
    action: str
    target: Any = None
    before: Any = None
    after: Any = None
    study: Any = None


def record_many(entries: Iterable[Entry], *, batch_size: int = 5000) -> int:
    """Append many events in their order under one chain lock, inserted in batches; return how many.

    Each event is built, stamped and hashed exactly as ``record`` does it; only the inserts are batched
    (bulk inserts), which is what makes a million events take minutes. Like ``record`` it runs in the
    caller's transaction: a rollback takes every event with it and the lock is held until the commit.
    """
    count = 0
    with transaction.atomic():
        seq, prev_hash = _lock_chain()
        pending = iter(entries)
        while batch := list(itertools.islice(pending, batch_size)):
            events = []
            for entry in batch:
                seq += 1
                event = _event(seq, prev_hash, entry.actor, entry.action, entry.target, entry.before, entry.after,
                               entry.study)
                prev_hash = event.hash
                events.append(event)
            AuditEvent.objects.bulk_create(events)
            count += len(events)
    return count


@dataclass(frozen=True)
class ChainBreak:
    seq: int
    event_id: int
    reason: str

    def __str__(self) -> str:
        return f"audit chain broken at event seq={self.seq} (id={self.event_id}): {self.reason}"


def _events() -> Iterator[AuditEvent]:
    return AuditEvent.objects.order_by("seq").iterator(chunk_size=2000)


def verify_chain() -> tuple[int, ChainBreak | None]:
    """Walk the chain from the start; return (events checked, the first broken link or None)."""
    expected_prev = GENESIS_HASH
    expected_seq = 1
    count = 0
    for event in _events():
        if event.seq != expected_seq:
            return count, ChainBreak(event.seq, event.pk, f"expected seq={expected_seq}: an event is missing")
        if event.prev_hash != expected_prev:
            return count, ChainBreak(event.seq, event.pk, "prev_hash does not match the previous event's hash")
        if event.compute_hash() != event.hash:
            return count, ChainBreak(event.seq, event.pk, "content does not match its hash (edited)")
        expected_prev = event.hash
        expected_seq += 1
        count += 1
    return count, None
