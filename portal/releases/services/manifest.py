"""The release manifest of a request, built through the exporter's one definition of the format, and the
portal's signing key (``CERES_SIGNING_KEY``)."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from exporter import release as release_format
from exporter.shard import rfc3339
from portal.audit.models import AuditEvent
from portal.releases.models import Approval, ReleaseItem, ReleaseRequest


def signing_key() -> Ed25519PrivateKey:
    return release_format.private_key_from_seed(settings.CERES_SIGNING_KEY)


def public_key() -> Ed25519PublicKey:
    return signing_key().public_key()


def public_key_pem() -> str:
    return release_format.public_key_pem(public_key())


def key_fingerprint() -> str:
    return release_format.fingerprint(public_key())


def section(request: ReleaseRequest, items: list[ReleaseItem] | None = None) -> dict[str, Any]:
    """What ethics officers are shown and approve: the request's frozen episodes and every file."""
    items = items if items is not None else list(request.items.select_related("episode__recording"))
    return release_format.release_section(
        study=request.study.code, release_id=request.release_id, purpose=request.purpose,
        requested_by=request.requested_by.get_username(), requested_at=rfc3339(request.created_at),
        episodes=[{"episode_index": item.episode_index, "episode_id": item.episode.recording.capture_id,
                   "receipt_sha256": item.receipt_sha256, "files": item.files} for item in items],
        supersedes=request.supersedes.release_id if request.supersedes_id else None)


def section_digest(request: ReleaseRequest, items: list[ReleaseItem] | None = None) -> str:
    return release_format.section_digest(section(request, items))


def chain_head() -> dict[str, Any]:
    """The newest audit event (sequence number and hash): what the audit log looked like at signing."""
    head = AuditEvent.objects.order_by("-seq").only("seq", "hash").first()
    return {"seq": head.seq, "hash": head.hash} if head else {"seq": 0, "hash": "0" * 64}


def signed_manifest(request: ReleaseRequest, *, released_at) -> tuple[bytes, bytes]:
    """The manifest's exact bytes and their Ed25519 signature."""
    approvals = [{"officer": approval.officer.get_username(), "approved_at": rfc3339(approval.approved_at),
                  "manifest_sha256": approval.manifest_sha256}
                 for approval in Approval.objects.filter(request=request).select_related("officer")]
    data = release_format.manifest_bytes(release=section(request), approvals=approvals,
                                         released_at=rfc3339(released_at), audit_chain_head=chain_head())
    return data, release_format.sign(signing_key(), data)
