"""Studies and the registry of things that belong to one study.

Every model that holds study data carries a ``study`` foreign key and a ``ScopedManager``:
reading it outside ``django_scopes.scope(study=...)`` raises ``ScopeError`` instead of
leaking another study's rows.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django_scopes import ScopedManager


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

    code = models.SlugField(max_length=40, unique=True, help_text="Short slug used in URLs and file names.")
    title = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    project_id = models.CharField("project identifier", max_length=128, blank=True)
    audio_policy = models.CharField(max_length=16, choices=AudioPolicy.choices, default=AudioPolicy.DISCARD)
    audio_retain_days = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    approvals_required = models.PositiveSmallIntegerField(default=2, validators=[MinValueValidator(1)])
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
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="headsets")
    headset_id = models.CharField("headset ID", max_length=128)
    model = models.CharField(max_length=128, blank=True)
    registered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    registered_at = models.DateTimeField(auto_now_add=True)
    retired_on = models.DateField(null=True, blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["headset_id"]
        constraints = [models.UniqueConstraint(fields=["study", "headset_id"], name="headset_unique_in_study")]

    def __str__(self) -> str:
        return self.headset_id
