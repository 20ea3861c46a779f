"""The portal's signing key (``CERES_SIGNING_KEY``): one Ed25519 key signs release and dataset manifests,
withdrawal notices and the audit log's checkpoints, and its public half verifies them all."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from exporter import release as release_format


def signing_key() -> Ed25519PrivateKey:
    return release_format.private_key_from_seed(settings.CERES_SIGNING_KEY)


def public_key() -> Ed25519PublicKey:
    return signing_key().public_key()


def public_key_pem() -> str:
    return release_format.public_key_pem(public_key())


def key_fingerprint() -> str:
    return release_format.fingerprint(public_key())
