"""API tokens: only a hash of each key is stored; the key is shown once, when it is made."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A key for the REST API, owned by one user, valid until ``expires_at``, optionally for one study.

    ``key_hash`` is the SHA-256 of the key (the key is 256 random bits, so a fast hash is enough);
    ``prefix`` is the key's first characters, shown so that a user can tell their tokens apart.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, null=True, blank=True,
                              related_name="+", help_text="If set, the token opens this study only.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    second_factor = models.BooleanField(
        default=False, help_text="Made from a session that had passed the second factor. A token made without one "
                                 "is refused once its user needs a second factor.")

    class Meta:
        ordering = ["user__username", "-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user}"

    def is_expired(self, at: datetime | None = None) -> bool:
        return self.expires_at <= (at or timezone.now())


class EnrolmentCode(models.Model):
    """A site administrator's one-time code that lets a user who must have a second factor set one up.

    Under ``CERES_REQUIRE_2FA`` the password alone does not open enrolment for an ethics officer or a site
    administrator: whoever holds a stolen password could otherwise enrol their own authenticator. Only the
    SHA-256 of the code is stored. Redeeming it makes the one authenticator that enrolment may confirm.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    code_hash = models.CharField(max_length=64, unique=True)
    issued_by = models.CharField(max_length=150, help_text="The site administrator (or command) who issued it.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    redeemed_at = models.DateTimeField(null=True, blank=True)
    device_id = models.PositiveIntegerField(null=True, blank=True,
                                            help_text="The authenticator made when the code was redeemed.")

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "second-factor enrolment code"

    def __str__(self) -> str:
        return f"enrolment code of {self.user} until {self.expires_at:%Y-%m-%d %H:%M}"


class PendingEmail(models.Model):
    """An address a user asked for on their account page, not confirmed yet.

    The user's ``email`` (where mail goes) becomes this address only when the signed link sent to it is opened
    by the same user, signed in; until then no mail but the confirmation link is sent to it.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pending_email")
    address = models.EmailField()
    requested_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "unconfirmed email address"

    def __str__(self) -> str:
        return f"{self.address} (unconfirmed) of {self.user}"
