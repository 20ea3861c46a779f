"""What a database-only attacker does to the audit log: raw SQL past the ORM and past the append-only trigger
(disabled, rows changed, enabled again, as the table's owner can), and re-hashing events with the public
algorithm (plain SHA-256 of the canonical payload; the audit key is not in the database)."""

from __future__ import annotations

import hashlib

from django.db import connection

from portal.audit.models import AuditEvent

TABLE = "audit_auditevent"
TRIGGER = "audit_event_append_only"


def raw(sql: str, params=(), *, table: str = TABLE, trigger: str = TRIGGER) -> None:
    """Run ``sql`` as a database superuser would: past the ORM and the append-only trigger of ``table``
    (PostgreSQL: disabled, then enabled; SQLite: dropped, then made again from the schema's own text)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
            cursor.execute(sql, params)
            cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
            return
        cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table])
        triggers = cursor.fetchall()
        assert triggers, f"{table} has no trigger to step past"
        for name, _ in triggers:
            cursor.execute(f'DROP TRIGGER "{name}"')
        cursor.execute(sql, params)
        for _, create in triggers:
            cursor.execute(create)


def truncate() -> None:
    """Empty the table the quickest way the database offers: TRUNCATE on PostgreSQL past its statement trigger
    (disabled, as the table's owner can), DELETE past the triggers on SQLite (which has no TRUNCATE)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {TABLE} DISABLE TRIGGER {TRIGGER}_truncate")
            cursor.execute(f"TRUNCATE {TABLE}")
            cursor.execute(f"ALTER TABLE {TABLE} ENABLE TRIGGER {TRIGGER}_truncate")
    else:
        raw(f"DELETE FROM {TABLE}")  # noqa: S608  (a constant)


def public_hash(event: AuditEvent) -> str:
    """The hash anyone can compute without the key: SHA-256 of the event's canonical payload."""
    return hashlib.sha256(event.canonical_payload()).hexdigest()


def rehash_from(seq: int, *, version: int, change=None) -> None:
    """Apply ``change(event)`` to the event at ``seq`` (if given), then re-make the hash of it and of every later
    event with the public algorithm, relinking each ``prev_hash``, and store them with ``hash_version=version``:
    the best a database-only attacker can do to hide an edit."""
    previous = AuditEvent.objects.filter(seq__lt=seq).order_by("-seq").values_list("hash", flat=True).first()
    prev_hash = previous or "0" * 64
    for event in list(AuditEvent.objects.filter(seq__gte=seq).order_by("seq")):
        if event.seq == seq and change is not None:
            change(event)
        event.prev_hash, event.hash_version = prev_hash, version
        # A version-1 payload has no hash_version in it; a forged version-2 payload does, hashed without the key.
        event.hash = public_hash(event)
        raw("UPDATE audit_auditevent SET actor_label = %s, action = %s, target_label = %s, prev_hash = %s, hash = %s, "
            "hash_version = %s WHERE id = %s",
            [event.actor_label, event.action, event.target_label, event.prev_hash, event.hash, event.hash_version,
             event.pk])
        prev_hash = event.hash



def raw_checkpoint_row_delete(pk: int) -> None:
    """Delete the database's note of a checkpoint (the signed object in storage is out of the attacker's reach)."""
    raw("DELETE FROM audit_auditcheckpoint WHERE id = %s", [pk], table="audit_auditcheckpoint",
        trigger="audit_checkpoint_append_only")
