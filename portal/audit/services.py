"""The single entry point for audit events: ``record(actor, action, target, before, after)``; the chain's walk
(``verify_chain``) and its signed checkpoints (``write_checkpoint``)."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DataError, connection, transaction
from django.db.models import Model
from django.utils import timezone

from exporter.release import fingerprint
from portal.audit import checkpoints
from portal.audit.checkpoints import Checkpoint, CheckpointProblem
from portal.audit.exceptions import CheckpointRefused
from portal.audit.models import (
    HASH_PLAIN,
    HASH_VERSION,
    HASH_VERSIONS,
    AuditCheckpoint,
    AuditEvent,
    ChainVerification,
)
from portal.core import queue, signing

log = logging.getLogger(__name__)
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
        hash_version=HASH_VERSION,
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
        transaction.on_commit(checkpoint_soon)
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
        if count:
            transaction.on_commit(checkpoint_soon)
    return count


# The cache key that says a checkpoint is already on its way: however many events commit meanwhile, one is sent.
CHECKPOINT_PENDING = "audit:checkpoint-pending"


def checkpoint_soon() -> None:
    """Once events have committed: have a signed checkpoint written ``CERES_AUDIT_CHECKPOINT_DELAY_SECONDS`` from
    now on the default queue, unless one is pending already (debounced through the cache, shared by every
    process with Redis). The task clears the mark before it reads the head, so events committed while it runs
    send the next one. A mark left by a lost task expires after a minute more than the delay."""
    delay = settings.CERES_AUDIT_CHECKPOINT_DELAY_SECONDS
    if not cache.add(CHECKPOINT_PENDING, True, timeout=delay + 60):
        return
    try:
        queue.send_later("audit.write_checkpoint", countdown=delay, expires=delay + 3600)
    except Exception:  # the broker is away: the hourly checkpoint still comes; the next event tries again
        cache.delete(CHECKPOINT_PENDING)
        log.exception("could not send the audit checkpoint task")


@dataclass(frozen=True)
class ChainBreak:
    """The first place the chain is not what it should be: the ``seq`` affected, the event there (None when the
    event is missing), and why."""

    seq: int | None  # None: no seq can be named (the checkpoint to compare with cannot be trusted)
    event_id: int | None
    reason: str
    by_checkpoint: bool = False  # found by comparing the chain with a signed checkpoint, not by walking it

    def __str__(self) -> str:
        if self.seq is None:
            return f"audit chain not verified: {self.reason}"
        where = f"event seq={self.seq} (id={self.event_id})" if self.event_id is not None else f"seq={self.seq}"
        return f"audit chain broken at {where}: {self.reason}"


# What a stored event's fields must hold to be read at all (a database writer can put anything in a SQLite column,
# and values PostgreSQL accepts that Python cannot load, such as an 'infinity' timestamp).
_TEXT_FIELDS = ("actor_label", "action", "target_type", "target_id", "target_label", "prev_hash", "hash")
# What loading a row can raise when a stored value is not one the portal can read (the database's own DataError
# when its driver cannot convert it; the converters' ValueError and the like).
UNREADABLE_ERRORS = (DataError, ValueError, TypeError, OverflowError, AttributeError)


def _unreadable(event: AuditEvent) -> str:
    """The first field of ``event`` that does not hold a readable value of its kind, and why; "" when all do."""
    if not isinstance(event.seq, int) or isinstance(event.seq, bool):
        return f"seq ({event.seq!r} is not a whole number)"
    created = event.created_at
    if not isinstance(created, datetime) or created.tzinfo is None:
        return f"created_at ({created!r} is not a time with a time zone)"
    for name in ("actor_id", "study_id"):
        value = getattr(event, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"{name} ({value!r} is not a whole number)"
    for name in _TEXT_FIELDS:
        if not isinstance(getattr(event, name), str):
            return f"{name} ({getattr(event, name)!r} is not text)"
    if not isinstance(event.hash_version, int) or isinstance(event.hash_version, bool):
        return f"hash_version ({event.hash_version!r} is not a whole number)"
    for name in ("before", "after"):
        try:
            json.dumps(getattr(event, name), cls=DjangoJSONEncoder)
        except (TypeError, ValueError) as exc:
            return f"{name} ({exc})"
    return ""


def _loads(queryset) -> bool:
    try:
        list(queryset)
    except UNREADABLE_ERRORS:
        return False
    return True


def _unloadable(after_seq: int, exc: Exception) -> ChainBreak:
    """The break at the first event after ``after_seq`` whose row cannot be loaded (loading raised ``exc``; a driver
    may convert a whole batch of rows at once, so the row is looked for): each of its fields is then loaded alone
    to name the one that fails."""
    ids = AuditEvent.objects.filter(seq__gt=after_seq).order_by("seq").values_list("pk", "seq")  # whole numbers
    found = None
    for start in itertools.count(0, 2000):
        batch = list(ids[start:start + 2000])
        if not batch:
            break
        if _loads(AuditEvent.objects.filter(pk__in=[pk for pk, _ in batch])):
            continue
        found = next(((pk, seq) for pk, seq in batch if not _loads(AuditEvent.objects.filter(pk=pk))), None)
        break
    if found is None:
        return ChainBreak(after_seq + 1, None, f"an event cannot be read: {exc}")
    pk, seq = found
    for field in AuditEvent._meta.concrete_fields:
        try:
            AuditEvent.objects.filter(pk=pk).values_list(field.attname, flat=True).get()
        except UNREADABLE_ERRORS as failed:
            return ChainBreak(seq, pk, f"a field cannot be read: {field.attname} (the stored value cannot be "
                                       f"loaded: {str(failed).strip() or type(failed).__name__})")
    return ChainBreak(seq, pk, f"an event cannot be read: {exc}")


def _readable(events: Iterable[AuditEvent], after_seq: int) -> Iterator[AuditEvent | ChainBreak]:
    """``events`` in order; a row that cannot be loaded ends them with the ``ChainBreak`` naming it."""
    pending, last = iter(events), after_seq
    while True:
        try:
            event = next(pending)
        except StopIteration:
            return
        except UNREADABLE_ERRORS as exc:
            broken = _unloadable(last, exc)
            # A driver converts a batch of rows at once: the readable events before the unreadable one come first.
            before = AuditEvent.objects.filter(seq__gt=last, seq__lt=broken.seq).order_by("seq")
            yield from before.iterator(chunk_size=2000)
            yield broken
            return
        last = event.seq if isinstance(event.seq, int) else last
        yield event


class ChainWalk:
    """Checks events one by one in ``seq`` order, from the event after ``after`` (seq, hash; the start of the
    chain by default): ``seq`` without gaps, each ``prev_hash`` the previous ``hash``, each hash what its
    content and version call for (keyed hashes with ``CERES_AUDIT_KEY``), and no unkeyed (version 1) hash
    after a keyed one or from ``keyed_from`` on (the first keyed event, as a signed checkpoint names it): a
    version-1 hash there is an event re-hashed with the public algorithm."""

    def __init__(self, *, after: tuple[int, str] = (0, GENESIS_HASH), keyed: bool = False,
                 keyed_from: int | None = None):
        self.expected_seq, self.expected_prev = after[0] + 1, after[1]
        self.keyed = keyed  # a keyed event came before
        self.keyed_from = keyed_from
        self.first_keyed: int | None = None  # the seq of the first keyed event this walk met
        self.count = 0

    def check(self, event: AuditEvent) -> ChainBreak | None:
        """None when ``event`` continues the chain (then it is counted), else the break it makes."""
        if unreadable := _unreadable(event):
            seq = event.seq if isinstance(event.seq, int) else self.expected_seq
            return ChainBreak(seq, event.pk, f"a field cannot be read: {unreadable}")
        if event.seq != self.expected_seq:
            return ChainBreak(event.seq, event.pk, f"expected seq={self.expected_seq}: an event is missing")
        if event.prev_hash != self.expected_prev:
            return ChainBreak(event.seq, event.pk, "prev_hash does not match the previous event's hash")
        if event.hash_version not in HASH_VERSIONS:
            return ChainBreak(event.seq, event.pk, f"unknown hash_version {event.hash_version!r}")
        if event.hash_version == HASH_PLAIN and self.keyed:
            return ChainBreak(event.seq, event.pk, "an unkeyed (version 1) hash after a keyed one: re-hashed with "
                                                   "the public algorithm")
        if event.hash_version == HASH_PLAIN and self.keyed_from is not None and event.seq >= self.keyed_from:
            return ChainBreak(event.seq, event.pk, f"an unkeyed (version 1) hash where the chain is keyed from "
                                                   f"seq={self.keyed_from} on: re-hashed with the public algorithm")
        if event.compute_hash() != event.hash:
            return ChainBreak(event.seq, event.pk, "content does not match its hash (edited, or re-hashed "
                                                   "without the audit key)")
        if event.hash_version != HASH_PLAIN and not self.keyed:
            self.keyed, self.first_keyed = True, event.seq
        self.expected_prev = event.hash
        self.expected_seq += 1
        self.count += 1
        return None


def chain_head() -> dict[str, Any]:
    """The newest audit event (sequence number and hash): what the audit log looked like at signing."""
    head = AuditEvent.objects.order_by("-seq").only("seq", "hash").first()
    return {"seq": head.seq, "hash": head.hash} if head else {"seq": 0, "hash": "0" * 64}


def missing(count: int) -> str:
    return "the newest event is missing" if count == 1 else f"the newest {count} events are missing"


def _events() -> Iterator[AuditEvent]:
    return AuditEvent.objects.order_by("seq").iterator(chunk_size=2000)


@dataclass(frozen=True)
class ChainReport:
    """A full verification: the events checked intact, the first problem (None: intact) and the signed checkpoint
    compared with (None: none in storage yet, or none that could be trusted)."""

    events: int
    problem: ChainBreak | None
    checkpoint: Checkpoint | None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def __str__(self) -> str:
        if self.problem is not None and self.problem.seq is None:
            return f"{self.problem} (the {self.events} events there link and hash right)"
        if self.problem is not None and self.problem.by_checkpoint and self.events == 0:
            return str(self.problem)
        if self.problem is not None and self.problem.by_checkpoint:
            return f"{self.problem} (the {self.events} events there link and hash right: only the checkpoint shows it)"
        if self.problem is not None:
            return f"{self.problem} ({self.events} events before it are intact)"
        if self.checkpoint is None:
            return (f"audit chain intact: {self.events} events; no signed checkpoint in storage yet, so deleted "
                    "newest events would not show")
        return (f"audit chain intact: {self.events} events; it extends the signed checkpoint of "
                f"{self.checkpoint.when} (seq {self.checkpoint.seq})")


# How many older checkpoints a re-written history is compared with to bound where it starts.
EARLIER_CHECKPOINTS = 64


def _rewritten_after(latest: Checkpoint) -> tuple[int, str]:
    """Where a history that no longer has the newest checkpoint's hash at its seq starts: after the newest earlier
    checkpoint whose event still has the hash it signed (the first seq that may be affected, and the words)."""
    key = signing.public_key()
    for name in checkpoints.names(limit=EARLIER_CHECKPOINTS + 1)[1:]:
        try:
            earlier = checkpoints.read(name, key)
        except CheckpointProblem:
            continue
        if earlier.seq < latest.seq and AuditEvent.objects.filter(seq=earlier.seq, hash=earlier.hash).exists():
            return earlier.seq + 1, (f"the history has been re-written after seq {earlier.seq}, which still has the "
                                     f"hash the checkpoint of {earlier.when} signed")
    return 1, "the history may be re-written from seq 1 on: no earlier checkpoint still matches"


def check_chain() -> ChainReport:
    """Walk the whole chain (links, seq without gaps, keyed hashes), then compare its head with the newest signed
    checkpoint in the releases storage, its signature checked with the public key: events deleted from the end,
    an emptied table and a re-hashed history are named with the first seq they affect."""
    try:
        checkpoint, distrusted = checkpoints.latest(signing.public_key()), ""
    except CheckpointProblem as exc:
        checkpoint, distrusted = None, str(exc)
    walk = ChainWalk(keyed_from=checkpoint.keyed_from if checkpoint else None)
    head, signed = 0, None
    for event in _readable(_events(), 0):
        if broken := (event if isinstance(event, ChainBreak) else walk.check(event)):
            return ChainReport(walk.count, broken, checkpoint)
        head = event.seq
        if checkpoint is not None and event.seq == checkpoint.seq:
            signed = event
    if distrusted:
        return ChainReport(walk.count, ChainBreak(None, None, f"the newest signed checkpoint cannot be trusted: "
                                                             f"{distrusted}", by_checkpoint=True), None)
    problem = None
    if checkpoint is None:
        pass
    elif walk.count == 0:
        problem = ChainBreak(1, None, f"the table is empty (truncated), but the checkpoint of {checkpoint.when} "
                                      f"names seq {checkpoint.seq}", by_checkpoint=True)
    elif head < checkpoint.seq:
        problem = ChainBreak(head + 1, None, f"{missing(checkpoint.seq - head)}: the chain ends at seq {head}, the "
                                             f"checkpoint of {checkpoint.when} names seq {checkpoint.seq}",
                             by_checkpoint=True)
    elif signed is not None and signed.hash != checkpoint.hash:
        first, where = _rewritten_after(checkpoint)
        problem = ChainBreak(first, None, f"the event at seq {checkpoint.seq} does not have the hash the checkpoint "
                                          f"of {checkpoint.when} signed: {where}",
                             by_checkpoint=True)
    return ChainReport(walk.count, problem, checkpoint)


def verify_chain() -> tuple[int, ChainBreak | None]:
    """``check_chain`` in short: (events checked intact, the first problem or None)."""
    report = check_chain()
    return report.events, report.problem


def run_verification(via: str) -> ChainReport:
    """A full verification, recorded (time, events, result) for the audit view."""
    started = timezone.now()
    report = check_chain()
    ChainVerification.objects.create(
        started_at=started, finished_at=timezone.now(), via=via, events=report.events, ok=report.ok,
        first_seq=report.problem.seq if report.problem else None, problem=str(report.problem or ""),
        checkpoint_seq=report.checkpoint.seq if report.checkpoint else None,
        checkpoint_at=report.checkpoint.at if report.checkpoint else None)
    return report


# --- signed checkpoints -------------------------------------------------------------------------------------


def _extend(previous: Checkpoint, head: AuditEvent | None) -> ChainWalk:
    """The walk of the events after ``previous`` up to ``head``; ``CheckpointRefused`` unless they extend it."""
    ends = head.seq if head is not None else 0
    if ends < previous.seq:
        raise CheckpointRefused(f"the chain ends at seq {ends}, but the checkpoint of {previous.when} names seq "
                                f"{previous.seq}: {missing(previous.seq - ends)}")
    anchor = AuditEvent.objects.filter(seq=previous.seq).only("seq", "hash", "hash_version").first()
    if anchor is None or anchor.hash != previous.hash:
        raise CheckpointRefused(f"the event at seq {previous.seq} does not have the hash the checkpoint of "
                                f"{previous.when} signed: the history has been re-written")
    walk = ChainWalk(after=(previous.seq, previous.hash), keyed=anchor.hash_version != HASH_PLAIN,
                     keyed_from=previous.keyed_from)
    events = AuditEvent.objects.filter(seq__gt=previous.seq, seq__lte=ends).order_by("seq").iterator(chunk_size=2000)
    for event in _readable(events, previous.seq):
        if broken := (event if isinstance(event, ChainBreak) else walk.check(event)):
            raise CheckpointRefused(f"{broken} (since the checkpoint of {previous.when})")
    return walk


def write_checkpoint(*, restart: str = "", actor=None, now=None) -> AuditCheckpoint | None:
    """Sign the chain's head (seq, hash, count, the first keyed seq, the time), store it in the releases storage
    and note it here for the audit view; None while the log has no event.

    The head must extend the newest stored checkpoint: the event that checkpoint names still has its hash, none
    after it is missing, and those since verify (links, seq, keyed hashes). Otherwise ``CheckpointRefused`` and
    nothing is written, so a checkpoint never vouches for a chain someone has cut or re-written. The first
    checkpoint, and one started afresh with ``restart`` (the reason: the database was restored from a backup,
    or the signing key changed), verifies the whole chain instead; a restart is an audit event naming the
    checkpoint it leaves behind.
    """
    key = signing.signing_key()
    previous = None
    if restart:
        try:
            left = checkpoints.latest(key.public_key())
            before = left.section() | {"name": left.name} if left else None
        except CheckpointProblem as exc:
            before = {"unreadable": str(exc)}
        record(actor, "audit.checkpoint_restarted", None, before=before, after={"reason": restart})
    else:
        try:
            previous = checkpoints.latest(key.public_key())
        except CheckpointProblem as exc:
            raise CheckpointRefused(f"{exc}; no checkpoint was written") from None
    head = AuditEvent.objects.order_by("-seq").only("seq", "hash", "hash_version").first()
    if previous is not None:
        walk = _extend(previous, head)
        count = previous.count + walk.count
        keyed_from = previous.keyed_from if previous.keyed_from is not None else walk.first_keyed
    elif head is None:
        return None
    else:
        walk = ChainWalk()
        events = AuditEvent.objects.filter(seq__lte=head.seq).order_by("seq").iterator(chunk_size=2000)
        for event in _readable(events, 0):
            if broken := (event if isinstance(event, ChainBreak) else walk.check(event)):
                raise CheckpointRefused(f"{broken}; no checkpoint was written")
        count, keyed_from = walk.count, walk.first_keyed
    checkpoint = Checkpoint(seq=head.seq, hash=head.hash, count=count, keyed_from=keyed_from,
                            at=now or timezone.now())
    name = checkpoints.store(checkpoint, key)
    return AuditCheckpoint.objects.create(seq=checkpoint.seq, hash=checkpoint.hash, event_count=count,
                                          keyed_from=keyed_from, created_at=checkpoint.at, name=name,
                                          key_fingerprint=fingerprint(key.public_key()), restart_reason=restart)


def checkpoint_at_migrate(using: str = "default") -> AuditCheckpoint | None:
    """At ``migrate`` (a fresh install, an upgrade, each deploy): a checkpoint of the head now, when the log has
    events, so none waits for the first hour's; None when the log is empty (or is not in the default database).
    ``CheckpointRefused`` as ``write_checkpoint``."""
    if using != "default" or AuditEvent._meta.db_table not in connection.introspection.table_names():
        return None
    if not AuditEvent.objects.exists():
        return None
    return write_checkpoint()
