"""Append-only, hash-chained audit events."""

from __future__ import annotations

import hashlib
import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from portal.core.append_only import AppendOnlyError as AppendOnlyError  # re-exported for callers
from portal.core.append_only import AppendOnlyModel, AppendOnlyQuerySet


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, cls=DjangoJSONEncoder)


class AuditEvent(AppendOnlyModel):
    """One state change or access: who, what, when, which object, before and after.

    ``seq`` numbers the chain without gaps; ``prev_hash`` is the previous event's ``hash``;
    ``hash`` is SHA-256 over ``canonical_payload()``. The actor and target are stored as plain
    values, not foreign keys, so that deleting a user or an object never rewrites history.
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

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        # A study's log, and the log of one action or one kind of target, each in chain order (newest first
        # by scanning backwards); the admin's filters list their values from the last two.
        indexes = [
            models.Index(fields=["study_id", "seq"], name="audit_study_seq"),
            models.Index(fields=["action", "seq"], name="audit_action_seq"),
            models.Index(fields=["target_type", "seq"], name="audit_target_type_seq"),
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
        return canonical_json(fields).encode("utf-8")

    def compute_hash(self) -> str:
        return hashlib.sha256(self.canonical_payload()).hexdigest()
