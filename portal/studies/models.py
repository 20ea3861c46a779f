"""Studies and the registry of things that belong to one study.

Every model that holds study data carries a ``study`` foreign key and a ``ScopedManager``:
reading it outside ``django_scopes.scope(study=...)`` raises ``ScopeError`` instead of
leaking another study's rows.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone
from django_scopes import ScopedManager

from exporter.cards import DEFAULT_LICENCE, LICENCES
from portal.core.append_only import AppendOnlyError as AppendOnlyError  # re-exported for callers
from portal.core.append_only import AppendOnlyModel, AppendOnlyQuerySet


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        ACTIVE = "active", "Active"
        CLOSED = "closed", "Closed"

    class AudioPolicy(models.TextChoices):
        DISCARD = "discard", "Discard raw audio at ingest"
        UNTIL_EXPORT = "until-export", "Keep raw audio until the episode is exported"
        RETAIN_DAYS = "retain-days", "Keep raw audio for N days after recording"
        RETAIN = "retain", "Keep raw audio"

    class FacePolicy(models.TextChoices):
        OFF = "off", "Off: faces are not looked for"
        DETECT = "detect", "Detect: faces shown to ethics officers, video released unchanged"
        REDACT = "redact", "Redact: every detected face is made unrecognisable in released video"

    code = models.SlugField(max_length=40, unique=True, help_text="Short slug used in URLs and file names.")
    title = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    project_id = models.CharField("project identifier", max_length=128, blank=True)
    audio_policy = models.CharField(max_length=16, choices=AudioPolicy.choices, default=AudioPolicy.DISCARD)
    audio_retain_days = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    # Bystanders' faces in the video (``portal.faces``): an ethics officer's decision (``services/face_policy.py``);
    # a release request keeps the policy in force when it was submitted.
    # db_default too: a row an older migration's model writes still gets the policy new studies get
    face_policy = models.CharField(max_length=8, choices=FacePolicy.choices, default=FacePolicy.REDACT,
                                   db_default=FacePolicy.REDACT)
    approvals_required = models.PositiveSmallIntegerField(default=2, validators=[MinValueValidator(1)])
    # A change below two approvals waits here until a second ethics officer confirms it
    # (``services/approval_policy.py``).
    pending_approvals_required = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="A number of approvals below 2 one ethics officer proposed, awaiting "
                                         "another's confirmation.")
    pending_approvals_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                             blank=True, related_name="+", help_text="Who proposed it.")
    pending_approvals_at = models.DateTimeField(null=True, blank=True)
    approval_second_factor = models.BooleanField(
        default=False, help_text="Approving a release needs a fresh second factor (CERES_REQUIRE_2FA asks it too).")
    # On by default: a superseding release only removes a withdrawn person's episodes from an approved one, a
    # strict subset of what was approved, checked again at signing (``releases.services.supersede``).
    carry_over_approvals = models.BooleanField(
        default=True, help_text="A release superseded after a withdrawal keeps its approvals (else it goes back to "
                                "the ethics officers' review).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["code"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(
                name="study_retain_days_iff_policy",
                condition=(
                    models.Q(audio_policy="retain-days", audio_retain_days__gte=1)
                    | (~models.Q(audio_policy="retain-days") & models.Q(audio_retain_days__isnull=True))
                ),
            ),
            models.CheckConstraint(name="study_approvals_at_least_one", condition=models.Q(approvals_required__gte=1)),
        ]

    def __str__(self) -> str:
        return self.code

    @property
    def audio_policy_label(self) -> str:
        if self.audio_policy == self.AudioPolicy.RETAIN_DAYS:
            return f"retain-days {self.audio_retain_days}"
        return self.audio_policy


class Headset(models.Model):
    """A headset of the study: its recordings pass the release gate when made on or after ``assigned_on`` and
    before ``retired_on``."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="headsets")
    headset_id = models.CharField("headset ID", max_length=128)
    model = models.CharField(max_length=128, blank=True)
    registered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    registered_at = models.DateTimeField(auto_now_add=True)
    assigned_on = models.DateField(
        "in the study since", default=timezone.localdate,
        help_text="The coordinator's declaration that the headset was the study's from this date: the "
                  "registration date unless an earlier one was declared, never later.")
    retired_on = models.DateField(null=True, blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["headset_id"]
        constraints = [models.UniqueConstraint(fields=["study", "headset_id"], name="headset_unique_in_study")]

    def __str__(self) -> str:
        return self.headset_id


class DataUseAgreement(models.Model):
    """A version of the study's data-use agreement; the current one has the highest version."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="data_use_agreements")
    version = models.PositiveIntegerField()
    text = models.TextField()
    sha256 = models.CharField("SHA-256 of the text (UTF-8)", max_length=64)
    licence = models.CharField(
        max_length=32, choices=[(key, key) for key in LICENCES], default=DEFAULT_LICENCE,
        # also the column's default, so a row written without it (an older migration's model) still gets one
        db_default=DEFAULT_LICENCE,
        help_text="What released data is licensed under, as an SPDX identifier, or 'other': the agreement itself "
                  "is the only licence (controlled access; the default). Named in every release's dataset card.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["study", "-version"]
        constraints = [models.UniqueConstraint(fields=["study", "version"], name="dua_unique_version")]

    def __str__(self) -> str:
        return f"{self.study_id}: data-use agreement v{self.version}"


class Demonstrator(models.Model):
    """A person demonstrating tasks, known only by a designator: the portal stores no names."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="demonstrators")
    designator = models.CharField(max_length=100)
    headset = models.ForeignKey(Headset, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                help_text="The headset whose ID gave the family pair, when generated from one.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["designator"]
        constraints = [models.UniqueConstraint(fields=["study", "designator"], name="demonstrator_unique_in_study")]

    def __str__(self) -> str:
        return self.designator


class ConsentDocument(models.Model):
    """The exact text or PDF a demonstrator consents to; releases need an ethics officer's acceptance."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="consent_documents")
    identifier = models.CharField(max_length=64, help_text="e.g. ICF-2026-03")
    version = models.CharField(max_length=32)
    issued_on = models.DateField(help_text="The date the document took effect; no consent to it is dated earlier.")
    file_name = models.CharField(max_length=255, help_text="Key in the captures storage.")
    media_type = models.CharField(max_length=100)
    sha256 = models.CharField("SHA-256", max_length=64)
    size = models.PositiveBigIntegerField()
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    uploaded_at = models.DateTimeField(auto_now_add=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    accepted_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["identifier", "version"]
        constraints = [
            models.UniqueConstraint(fields=["study", "identifier", "version"], name="consent_document_unique"),
            models.CheckConstraint(
                name="consent_document_accepted_together",
                condition=models.Q(accepted_by__isnull=True, accepted_at__isnull=True)
                | models.Q(accepted_by__isnull=False, accepted_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.identifier} v{self.version}"

    @property
    def is_accepted(self) -> bool:
        return self.accepted_at is not None


class ConsentEvent(AppendOnlyModel):
    """One append-only consent event: consent given (document, date, scopes) or withdrawn (date, reason)."""

    append_only_hint = "; record a new event (a withdrawal) instead"

    class Kind(models.TextChoices):
        GIVEN = "given", "Consent given"
        WITHDRAWN = "withdrawn", "Consent withdrawn"

    class Scope(models.TextChoices):
        EPISODE_RELEASE = "episode_release", "Release of episodes"
        RAW_AUDIO_RETENTION = "raw_audio_retention", "Retention of raw microphone audio"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="consent_events")
    demonstrator = models.ForeignKey(Demonstrator, on_delete=models.PROTECT, related_name="consent_events")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    document = models.ForeignKey(ConsentDocument, on_delete=models.PROTECT, null=True, blank=True,
                                 related_name="consent_events")
    event_date = models.DateField(help_text="The consent date, or the withdrawal date.")
    scopes = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    recorded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    recorded_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager(study="study", _manager_class=models.Manager.from_queryset(AppendOnlyQuerySet))

    class Meta:
        ordering = ["event_date", "recorded_at", "pk"]
        constraints = [
            models.CheckConstraint(
                name="consent_event_shape",
                condition=models.Q(kind="given", document__isnull=False)
                | models.Q(kind="withdrawn", document__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.demonstrator} {self.kind} on {self.event_date}"

