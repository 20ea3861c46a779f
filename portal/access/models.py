"""Per-study role grants."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    COORDINATOR = "coordinator", "Study coordinator"
    ETHICS_OFFICER = "ethics_officer", "Ethics officer"
    RESEARCHER = "researcher", "Researcher"


class RoleGrant(models.Model):
    """One role of one user in one study, optionally until ``expires_at``.

    Grants are access-control records, read before a study scope exists, so they are not scoped;
    every read goes through ``portal.access.permissions``.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_grants")
    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="role_grants")
    role = models.CharField(max_length=20, choices=Role.choices)
    expires_at = models.DateTimeField(null=True, blank=True)
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study__code", "user__username", "role"]
        constraints = [models.UniqueConstraint(fields=["user", "study", "role"], name="grant_unique_role")]

    def __str__(self) -> str:
        return f"{self.user} is {self.get_role_display()} in {self.study}"

    def is_active(self, at: datetime | None = None) -> bool:
        return self.expires_at is None or self.expires_at > (at or timezone.now())
