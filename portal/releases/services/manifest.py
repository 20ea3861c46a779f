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
    """What ethics officers are shown and approve: the request's frozen episodes and every file. Built only from
    what the request froze when it was made (the study's code, the requester's name, each episode's capture id,
    receipt and files), never from rows a rename or an edit may change since."""
    items = items if items is not None else list(request.items.all())
    return release_format.release_section(
        study=request.study_code, release_id=request.release_id, purpose=request.purpose,
        requested_by=request.requested_by_name, requested_at=rfc3339(request.created_at),
        episodes=[{"episode_index": item.episode_index, "episode_id": item.capture_id,
                   "receipt_sha256": item.receipt_sha256, "files": item.files} for item in items],
        supersedes=request.supersedes.release_id if request.supersedes_id else None)


def section_digest(request: ReleaseRequest, items: list[ReleaseItem] | None = None) -> str:
    return release_format.section_digest(section(request, items))


def _recorded(request: ReleaseRequest) -> dict[str, list[dict[str, Any]]]:
    """What the audit log recorded when the request was made, submitted and approved (each event's ``after``)."""
    recorded: dict[str, list[dict[str, Any]]] = {action: [] for action in RECORDED}
    for action, after in AuditEvent.objects.filter(
            target_type=f"{ReleaseRequest._meta.app_label}.{ReleaseRequest._meta.model_name}",
            target_id=str(request.pk), action__in=RECORDED).order_by("seq").values_list("action", "after"):
        recorded[action].append(after or {})
    return recorded


RECORDED = ("release.requested", "release.submitted", "release.approval_given", "release.approval_carried_over")


def approval_mismatches(request: ReleaseRequest) -> list[str]:
    """Why what would be signed now is not what was approved (empty when it is).

    The section rebuilt from the request's rows must have the digest the request was made with, that every
    approval names, and that the audit log recorded when the request was made; each approval must be one the
    audit log recorded (the officer's name, the digest and the time); and there must be as many as the request
    needed when it was submitted (the larger of its row and the audit log's record of it). A row changed, added
    or removed after the approval by someone who can write to the database stops the release."""
    current = section_digest(request)
    problems = []
    if current != request.manifest_sha256:
        problems.append(f"the manifest section's digest is {current}, not the approved {request.manifest_sha256}")
    recorded = _recorded(request)
    made = [after.get("manifest_sha256") for after in recorded["release.requested"]]
    if made and current not in made:
        problems.append(f"the manifest section's digest is {current}, not the {made[-1]} the audit log recorded "
                        f"when the request was made")
    given = recorded["release.approval_given"] + recorded["release.approval_carried_over"]
    approvals = list(Approval.objects.filter(request=request).order_by("approved_at", "pk"))
    for approval in approvals:
        if approval.manifest_sha256 != current:
            problems.append(f"the approval of {approval.officer_name!r} names {approval.manifest_sha256}, "
                            f"not {current}")
        approved_at = rfc3339(approval.approved_at)
        if not any(after.get("officer") == approval.officer_name
                   and after.get("manifest_sha256") == approval.manifest_sha256
                   and after.get("approved_at", approved_at) == approved_at for after in given):
            problems.append(f"the approval of {approval.officer_name!r} at {approved_at} is not one the audit log "
                            f"recorded")
    frozen = [after["approvals_required"] for after in recorded["release.requested"] + recorded["release.submitted"]
              if after.get("approvals_required")]
    needed = max([request.approvals_required or 0, *frozen])
    officers = len({approval.officer_id for approval in approvals})
    if not needed or officers < needed:
        problems.append(f"{officers} ethics officer(s) approved; the request needs {needed or 'an unknown number'}")
    return problems


def chain_head() -> dict[str, Any]:
    """The newest audit event (sequence number and hash): what the audit log looked like at signing."""
    head = AuditEvent.objects.order_by("-seq").only("seq", "hash").first()
    return {"seq": head.seq, "hash": head.hash} if head else {"seq": 0, "hash": "0" * 64}


def signed_manifest(request: ReleaseRequest, *, released_at) -> tuple[bytes, bytes]:
    """The manifest's exact bytes and their Ed25519 signature."""
    approvals = [{"officer": approval.officer_name, "approved_at": rfc3339(approval.approved_at),
                  "manifest_sha256": approval.manifest_sha256}
                 for approval in Approval.objects.filter(request=request)]
    data = release_format.manifest_bytes(release=section(request), approvals=approvals,
                                         released_at=rfc3339(released_at), audit_chain_head=chain_head())
    return data, release_format.sign(signing_key(), data)
