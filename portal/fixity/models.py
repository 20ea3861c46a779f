"""Fixity runs (what each pass over the stored objects checked and found) and the alerts a study's coordinators and
ethics officers see: a shard that failed its receipt verification, or the problems a fixity run found.

A run covers the whole store (or a slice of it), so it is not study data: ``FixityRun`` has no study and no scope.
What a run did in one study (``FixityRunStudy``) and the problems it found there (``FixityProblem``) are; a
problem that belongs to no known study (an orphan outside every study's folder) has no study and is shown to
site administrators only, in the admin. State changes happen only in ``portal.fixity.services``.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django_scopes import ScopedManager

from portal.core.leases import LeasedJob
from portal.core.states import StateMachineModel
from portal.fixity.exceptions import IllegalTransition
from portal.studies.models import Study


class FixityRun(LeasedJob):
    """One pass of the fixity check over a slice of the stored objects, or over all of them."""

    # Long: one very large object is hashed between two heartbeats.
    LEASE_SETTING, LEASE_JOB = "CERES_FIXITY_LEASE_SECONDS", "fixity run"

    class Kind(models.TextChoices):
        SLICE = "slice", "Scheduled slice"
        FULL = "full", "Full pass"

    kind = models.CharField(max_length=5, choices=Kind.choices)
    slice_index = models.PositiveIntegerField(null=True, blank=True, help_text="Which slice (from 0); none: all.")
    slice_count = models.PositiveIntegerField(null=True, blank=True, help_text="How many slices make the store.")
    studies = models.TextField(blank=True, help_text="The study codes the run was limited to; empty: every study.")
    requested_by = models.CharField(max_length=150, help_text="'schedule', or who ran it by hand.")
    started_at = models.DateTimeField(default=timezone.now, editable=False)
    finished_at = models.DateTimeField(null=True, blank=True)
    units_checked = models.PositiveIntegerField(default=0, help_text="Record folders compared with their record.")
    objects_listed = models.PositiveBigIntegerField(default=0)
    objects_checked = models.PositiveBigIntegerField(default=0, help_text="Objects hashed, streamed from storage.")
    bytes_checked = models.PositiveBigIntegerField(default=0)
    problem_count = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why the run stopped before its end.")

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"fixity run {self.pk} ({self.scope_label})"

    @property
    def scope_label(self) -> str:
        what = "whole store" if self.kind == self.Kind.FULL else f"slice {self.slice_index + 1} of {self.slice_count}"
        return f"{what}, studies {self.studies}" if self.studies else what

    @property
    def duration(self) -> timedelta | None:
        return self.finished_at - self.started_at if self.finished_at else None

    @property
    def took(self) -> str:
        """The run's duration for people: "0.4 s", "3 min 12 s", "1 h 5 min"; empty while it runs."""
        if self.duration is None:
            return ""
        seconds = self.duration.total_seconds()
        if seconds < 60:
            return f"{seconds:.1f} s"
        minutes, seconds = divmod(round(seconds), 60)
        return f"{minutes} min {seconds} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"

    @property
    def succeeded(self) -> bool:
        return self.finished_at is not None and not self.error


class FixityRunStudy(models.Model):
    """What one run listed and checked of one study's objects, and how many problems it found there."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+", db_index=False)
    run = models.ForeignKey(FixityRun, on_delete=models.PROTECT, related_name="shares")
    objects_listed = models.PositiveBigIntegerField(default=0)
    objects_checked = models.PositiveBigIntegerField(default=0)
    bytes_checked = models.PositiveBigIntegerField(default=0)
    problem_count = models.PositiveIntegerField(default=0)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-run_id"]
        # Also the index of the study's list of runs, newest first (keyset on run_id).
        constraints = [models.UniqueConstraint(fields=["study", "run"], name="fixity_run_study_unique")]

    def __str__(self) -> str:
        return f"{self.run} in {self.study_id}"


class Alert(StateMachineModel):
    """Something a study's coordinators and ethics officers must look at. Open until one of them acknowledges it
    (with a note: who looks into it and how) and resolved with a note saying what was done; both audited."""

    class Kind(models.TextChoices):
        RECEIPT_MISMATCH = "receipt_mismatch", "Shard does not match its receipt"
        FIXITY = "fixity", "Fixity check found problems"
        RELEASE_INTEGRITY = "release_integrity", "Release refused: not what was approved"

    class State(models.TextChoices):
        OPEN = "open", "Open"
        ACKNOWLEDGED = "acknowledged", "Acknowledged"
        RESOLVED = "resolved", "Resolved"

    TRANSITIONS = {
        State.OPEN: frozenset({State.ACKNOWLEDGED, State.RESOLVED}),
        State.ACKNOWLEDGED: frozenset({State.RESOLVED}),
        State.RESOLVED: frozenset(),
    }
    UNRESOLVED = (State.OPEN, State.ACKNOWLEDGED)
    illegal_transition = IllegalTransition

    # Indexed as the first column of the list's indexes, not alone.
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+", db_index=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    state = models.CharField(max_length=12, choices=State.choices, default=State.OPEN)
    message = models.TextField()
    episode = models.ForeignKey("recordings.Episode", on_delete=models.PROTECT, null=True, blank=True,
                                related_name="alerts", help_text="The shard whose verification failed.")
    run = models.ForeignKey(FixityRun, on_delete=models.PROTECT, null=True, blank=True, related_name="alerts",
                            help_text="The fixity run that found the problems.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                        related_name="+")
    acknowledged_note = models.TextField(blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    resolved_note = models.TextField(blank=True)
    emailed_at = models.DateTimeField(null=True, blank=True)
    emailed_to = models.PositiveIntegerField(default=0, help_text="How many people the alert was emailed to.")

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["study", "created_at", "id"], name="alert_list"),
                   models.Index(fields=["study", "state", "created_at", "id"], name="alert_list_state")]

    def __str__(self) -> str:
        return self.message[:80]

    def transition_refusal(self, state: str) -> str:
        return (f"the alert is {self.get_state_display().lower()}; it cannot become "
                f"{self.State(state).label.lower()}")

    @property
    def unresolved(self) -> bool:
        return self.state in self.UNRESOLVED


class FixityProblem(models.Model):
    """One problem a fixity run found: an object that changed, is missing, is unreadable, or that no record
    accounts for (an orphan)."""

    class Kind(models.TextChoices):
        CHANGED = "changed", "Changed"
        MISSING = "missing", "Missing"
        ORPHAN = "orphan", "Orphan"
        UNREADABLE = "unreadable", "Unreadable"

    # Both relations are indexed by the named indexes below, each ending in the list's order.
    run = models.ForeignKey(FixityRun, on_delete=models.PROTECT, related_name="problems", db_index=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                              db_index=False, help_text="None: the object lies outside every known study.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    storage = models.CharField(max_length=20, help_text="The storage's name: shards or releases.")
    object_name = models.CharField(max_length=1024)
    detail = models.TextField()
    alert = models.ForeignKey(Alert, on_delete=models.PROTECT, null=True, blank=True, related_name="problems",
                              db_index=False,
                              help_text="The alert that reports it (an earlier one still unresolved, for a repeat).")

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["pk"]
        indexes = [models.Index(fields=["study", "run", "id"], name="fixity_problem_run"),
                   models.Index(fields=["alert", "id"], name="fixity_problem_alert"),
                   models.Index(fields=["run", "id"], name="fixity_problem_all")]

    def __str__(self) -> str:
        return f"{self.kind}: {self.storage}:{self.object_name}"

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "storage": self.storage, "object": self.object_name, "detail": self.detail}
