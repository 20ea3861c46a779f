"""``check --deploy``: a deployment keys the audit chain with a key it was given, never one made on the spot."""

from __future__ import annotations

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, deploy=True)
def audit_key_is_configured(app_configs, **kwargs) -> list[checks.CheckMessage]:
    if settings.CERES_AUDIT_KEY_FROM_ENV:
        return []
    return [checks.Warning(
        "CERES_AUDIT_KEY is not set: audit events are keyed with a key generated into the data folder, which "
        "another web or worker machine would not share (its events would not verify).",
        hint="Set CERES_AUDIT_KEY to base64 of 32 random bytes on every machine, and back it up apart from the "
             "database (docs/operations.md).",
        id="ceres.W002",
    )]
