"""Per-study role grants."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from portal.core.roles import Role

RESEARCHER_NEEDS_AN_END = "a researcher grant needs an end: set its expiry (researcher access is given until a date)"


def researcher_end_problem(expires_at: datetime | None, now: datetime | None = None) -> str | None:
    """What is wrong with ``expires_at`` as the end of a researcher grant, or None: it must be set, and at most
    ``CERES_ACCESS_MAX_DAYS`` away, as an access decision's is (an end far off would be no end)."""
    if expires_at is None:
        return RESEARCHER_NEEDS_AN_END
    longest = settings.CERES_ACCESS_MAX_DAYS
    if expires_at - (now or timezone.now()) > timedelta(days=longest):
        return f"a researcher grant ends at most {longest} days from now; grant it again when it ends"
    return None


class RoleGrant(models.Model):
    """One role of one user in one study, optionally until ``expires_at`` (a researcher grant always has one).

    Grants are access-control records, read before a study scope exists, so they are not scoped;
    every read goes through ``portal.access.permissions``. A researcher grant made by granting an access request
    names that decision (``access_request``), so revoking the request removes only what it granted.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_grants")
    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="role_grants")
    role = models.CharField(max_length=20, choices=Role.choices)
    expires_at = models.DateTimeField(null=True, blank=True)
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    granted_at = models.DateTimeField(auto_now_add=True)
    access_request = models.ForeignKey(
        "research.AccessRequest", on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="The access-request decision that gave this grant its expiry; empty when made in the admin.")

    class Meta:
        ordering = ["study__code", "user__username", "role"]
        constraints = [
            models.UniqueConstraint(fields=["user", "study", "role"], name="grant_unique_role"),
            models.CheckConstraint(name="grant_researcher_expires",
                                   condition=~Q(role=Role.RESEARCHER) | Q(expires_at__isnull=False),
                                   violation_error_message=RESEARCHER_NEEDS_AN_END),
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.get_role_display()} in {self.study}"

    def clean(self) -> None:
        problem = researcher_end_problem(self.expires_at) if self.role == Role.RESEARCHER else None
        if problem:
            raise ValidationError({"expires_at": problem})

    def is_active(self, at: datetime | None = None) -> bool:
        return self.expires_at is None or self.expires_at > (at or timezone.now())
