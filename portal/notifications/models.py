"""What a person is told: one row per message in their inbox, with what became of its email.

A notification belongs to its recipient alone (every query of the pages filters on the signed-in user). Its email
is a delivery the inbox row records: where it went (the address masked), when it was delivered, or why not.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Kind(models.TextChoices):
    RELEASE_AWAITS_APPROVAL = "release_awaits_approval", "A release awaits your approval"
    RELEASE_APPROVED = "release_approved", "A release was approved"
    RELEASE_REJECTED = "release_rejected", "A release was rejected"
    RELEASE_PUBLISHED = "release_published", "A release was published"
    RELEASE_FAILED = "release_failed", "A release failed"
    ACCESS_AWAITS_DECISION = "access_awaits_decision", "An access request awaits a decision"
    ACCESS_GRANTED = "access_granted", "Your access was granted"
    ACCESS_REFUSED = "access_refused", "Your access was refused"
    ACCESS_REVOKED = "access_revoked", "Your access was revoked"
    ACCESS_EXPIRING = "access_expiring", "Your access expires soon"
    ACCESS_EXPIRED = "access_expired", "Your access expired"
    DATASET_READY = "dataset_ready", "A dataset you asked for is ready"
    DATASET_FAILED = "dataset_failed", "A dataset you asked for failed"
    WITHDRAWAL_REACHED = "withdrawal_reached", "A withdrawal reached data you downloaded"
    INTEGRITY_ALERT = "integrity_alert", "An integrity alert"


class Email(models.TextChoices):
    NO_ADDRESS = "no_address", "No email address"
    SWITCHED_OFF = "switched_off", "Email switched off"
    PENDING = "pending", "Email being sent"
    DELIVERED = "delivered", "Email delivered"
    FAILED = "failed", "Email failed"


class Notification(models.Model):
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications",
                                  db_index=False)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True, help_text="The page of the object (a path of the portal).")
    key = models.CharField(max_length=120, blank=True,
                           help_text="Makes the event's message once per recipient (empty: no such rule).")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    # The email delivery of this message.
    email = models.CharField(max_length=12, choices=Email.choices)
    email_to = models.CharField(max_length=254, blank=True, help_text="The address, masked.")
    email_at = models.DateTimeField(null=True, blank=True, help_text="When it was delivered (or gave up).")
    email_error = models.CharField(max_length=500, blank=True)
    email_attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["recipient", "-created_at", "-id"], name="notification_inbox"),
                   models.Index(fields=["recipient"], condition=Q(read_at__isnull=True), name="notification_unread")]
        constraints = [models.UniqueConstraint(fields=["recipient", "key"], condition=~Q(key=""),
                                               name="notification_once_per_key")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} for {self.recipient}"

    @property
    def delivery(self) -> str:
        """What was delivered and where, said plainly (the pages show this; never more than happened)."""
        if self.email == Email.NO_ADDRESS:
            return "no email address: shown in your inbox"
        if self.email == Email.SWITCHED_OFF:
            return "email switched off for this kind: shown in your inbox"
        if self.email == Email.PENDING:
            return f"in your inbox; email to {self.email_to} not delivered yet"
        if self.email == Email.DELIVERED:
            return f"in your inbox; email to {self.email_to} delivered at {self.email_at:%Y-%m-%d %H:%M} UTC"
        return f"in your inbox; email to {self.email_to} failed: {self.email_error}"


class EmailSwitch(models.Model):
    """A kind of message a user does not want by email (it still reaches their inbox). No row: email on."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32, choices=Kind.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="email_switch_once")]

    def __str__(self) -> str:
        return f"{self.user}: no email for {self.kind}"
