"""Append-only, hash-chained audit events."""

from __future__ import annotations

import hashlib
import hmac
import json

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from portal.core.append_only import AppendOnlyError as AppendOnlyError  # re-exported for callers
from portal.core.append_only import AppendOnlyModel, AppendOnlyQuerySet


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, cls=DjangoJSONEncoder)


# How an event's ``hash`` is made. Version 1: SHA-256 of the canonical payload, which anyone can recompute (the
# events written before the keyed chain). Version 2: HMAC-SHA256 with ``CERES_AUDIT_KEY``, which lives in the
# settings, not in the database, so a database-only attacker cannot re-make it. New events are version 2.
HASH_PLAIN = 1
HASH_KEYED = 2
HASH_VERSION = HASH_KEYED
HASH_VERSIONS = (HASH_PLAIN, HASH_KEYED)


class AuditEvent(AppendOnlyModel):
    """One state change or access: who, what, when, which object, before and after.

    ``seq`` numbers the chain without gaps; ``prev_hash`` is the previous event's ``hash``;
    ``hash`` is, by ``hash_version``, SHA-256 (1) or HMAC-SHA256 with ``CERES_AUDIT_KEY`` (2) over
    ``canonical_payload()``. The actor and target are stored as plain values, not foreign keys, so that
    deleting a user or an object never rewrites history.
    """

    seq = models.BigIntegerField(unique=True, editable=False)
    created_at = models.DateTimeField(editable=False)
    actor_id = models.BigIntegerField(null=True, editable=False)
    actor_label = models.CharField(max_length=150, editable=False)
    action = models.CharField(max_length=80, editable=False)
    study_id = models.BigIntegerField(null=True, editable=False)
    target_type = models.CharField(max_length=100, editable=False)
    target_id = models.CharField(max_length=64, editable=False)
    target_label = models.CharField(max_length=255, editable=False)
    before = models.JSONField(null=True, editable=False, encoder=DjangoJSONEncoder)
    after = models.JSONField(null=True, editable=False, encoder=DjangoJSONEncoder)
    prev_hash = models.CharField(max_length=64, editable=False)
    hash = models.CharField(max_length=64, unique=True, editable=False)
    # No default: every event states how its hash was made (the services write HASH_VERSION).
    hash_version = models.PositiveSmallIntegerField(editable=False)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        # A study's log, and the log of one action or one kind of target, each in chain order (newest first
        # by scanning backwards); the admin's filters list their values from the last two. The study's audit
        # view (portal/audit/study_log.py): one object's events (and a history's few objects), a study's events by
        # actor and by action, each in chain order, and by time.
        indexes = [
            models.Index(fields=["study_id", "seq"], name="audit_study_seq"),
            models.Index(fields=["action", "seq"], name="audit_action_seq"),
            models.Index(fields=["target_type", "seq"], name="audit_target_type_seq"),
            models.Index(fields=["target_type", "target_id", "seq"], name="audit_target_seq"),
            models.Index(fields=["study_id", "actor_label", "seq"], name="audit_study_actor_seq"),
            models.Index(fields=["study_id", "action", "seq"], name="audit_study_action_seq"),
            models.Index(fields=["study_id", "created_at"], name="audit_study_time"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} {self.target_type}:{self.target_id} by {self.actor_label}"

    def canonical_payload(self) -> bytes:
        created = self.created_at.isoformat(timespec="microseconds")
        fields = {
            "seq": self.seq,
            "created_at": created,
            "actor_id": self.actor_id,
            "actor_label": self.actor_label,
            "action": self.action,
            "study_id": self.study_id,
            "target_type": self.target_type,
            "target_id": self.target_id,
            "target_label": self.target_label,
            "before": self.before,
            "after": self.after,
            "prev_hash": self.prev_hash,
        }
        if self.hash_version != HASH_PLAIN:  # version 1 payloads stay what they were when they were hashed
            fields["hash_version"] = self.hash_version
        return canonical_json(fields).encode("utf-8")

    def compute_hash(self, key: bytes | None = None) -> str:
        """The hash this event's content calls for: by its ``hash_version``, plain SHA-256 or HMAC-SHA256 with
        ``key`` (default ``CERES_AUDIT_KEY``). ``ValueError`` for a version this code does not know."""
        payload = self.canonical_payload()
        if self.hash_version == HASH_PLAIN:
            return hashlib.sha256(payload).hexdigest()
        if self.hash_version == HASH_KEYED:
            return hmac.new(settings.CERES_AUDIT_KEY if key is None else key, payload, hashlib.sha256).hexdigest()
        raise ValueError(f"unknown hash_version {self.hash_version!r}")


class AuditCheckpoint(AppendOnlyModel):
    """A signed checkpoint of the chain's head as the portal wrote it to the releases storage (``name``), kept here
    for the audit view. Verification never trusts this row: it reads the signed object from storage."""

    seq = models.BigIntegerField(editable=False)
    hash = models.CharField(max_length=64, editable=False)
    event_count = models.BigIntegerField(editable=False)
    keyed_from = models.BigIntegerField(null=True, editable=False)
    created_at = models.DateTimeField(editable=False)
    name = models.CharField(max_length=255, editable=False)
    key_fingerprint = models.CharField(max_length=64, editable=False)
    # Set when someone started the checkpoints afresh (``audit_checkpoint --restart``): why.
    restart_reason = models.TextField(blank=True, editable=False)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="audit_checkpoint_time")]

    def __str__(self) -> str:
        return f"checkpoint of seq {self.seq} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class ChainVerification(AppendOnlyModel):
    """One full verification of the chain (``audit_verify``, or beat's daily ``audit.verify_chain``): when, how many
    events checked intact, and the first problem with the first seq it affects, for the audit view."""

    class Via(models.TextChoices):
        COMMAND = "command", "manage.py audit_verify"
        TASK = "task", "scheduled"

    started_at = models.DateTimeField(editable=False)
    finished_at = models.DateTimeField(editable=False)
    via = models.CharField(max_length=16, choices=Via.choices, editable=False)
    events = models.BigIntegerField(editable=False)  # checked intact (before the first problem)
    ok = models.BooleanField(editable=False)
    first_seq = models.BigIntegerField(null=True, editable=False)  # the first seq the problem affects
    problem = models.TextField(blank=True, editable=False)
    checkpoint_seq = models.BigIntegerField(null=True, editable=False)  # the signed checkpoint compared with
    checkpoint_at = models.DateTimeField(null=True, editable=False)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["started_at"], name="audit_verification_time")]

    def __str__(self) -> str:
        return f"verification at {self.started_at:%Y-%m-%d %H:%M:%S}: {'intact' if self.ok else self.problem}"
