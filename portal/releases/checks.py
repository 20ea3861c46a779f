"""``check --deploy``: a deployment signs releases with a key it was given, never one made on the spot."""

from __future__ import annotations

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, deploy=True)
def signing_key_is_configured(app_configs, **kwargs) -> list[checks.CheckMessage]:
    if settings.CERES_SIGNING_KEY_FROM_ENV:
        return []
    return [checks.Warning(
        "CERES_SIGNING_KEY is not set: release manifests are signed with a key generated into the data folder, "
        "which another web or worker machine would not share.",
        hint="Set CERES_SIGNING_KEY to base64 of a 32-byte Ed25519 seed (see docs/releases.md) on every machine.",
        id="ceres.W001",
    )]
