"""The client address of a request, for login throttling and audit events."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    """``REMOTE_ADDR``, or behind ``CERES_TRUSTED_PROXIES`` reverse proxies the address the outermost one saw.

    Each trusted proxy appends the address it received from to ``X-Forwarded-For``; entries further left
    were written by the client and are not trusted.
    """
    proxies = settings.CERES_TRUSTED_PROXIES
    if proxies:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies]
    return request.META.get("REMOTE_ADDR")
