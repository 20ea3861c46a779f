"""Releases after a consent withdrawal: a published release that held a withdrawn demonstrator's episodes is
superseded by a new request holding its other episodes (frozen as they were: same receipts, same files, the
stored shards already read for the gate). Its manifest section names the release it supersedes (number and
manifest digest) and the withdrawal that made it. With the study's ``carry_over_approvals`` (on by default) it
is a strict subset of what was approved: it carries the superseded release's approvals (each as the officer gave
it: their name, time and the digest they approved, which its section names too) and is released at once,
provided its gate passes now and they are as many as it needs; the release job checks exactly that at signing
(``manifest.carried_mismatches``). Otherwise it goes back to the ethics officers' review. Requests still open
that hold such episodes are rejected with the reason."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from exporter.timestamps import rfc3339
from portal.audit.services import record
from portal.core import queue
from portal.releases import notices
from portal.releases.models import Approval, ReleaseItem, ReleaseRequest
from portal.releases.services import gate, manifest
from portal.releases.services.release_requests import lock_fresh, set_state
from portal.studies.models import Study

State = ReleaseRequest.State
_COPIED = ("episode", "episode_index", "capture_id", "receipt_sha256", "files", "inspected_at", "video_has_audio",
           "leaks", "inspection_error")


def supersede(release: ReleaseRequest, withdrawn: set[int], *, reason: str,
              withdrawal: int | None = None) -> ReleaseRequest | None:
    """Mark the published ``release`` superseded and make the request of its episodes not in ``withdrawn`` (None
    when none is left), made by ``withdrawal`` (its id). Idempotent: a request superseded already returns its
    successor."""
    with transaction.atomic():
        lock_fresh(release)
        if release.state == State.SUPERSEDED:
            return ReleaseRequest.objects.filter(supersedes=release).first()
        kept = [item for item in release.items.select_related("episode__recording") if
                item.episode_index not in withdrawn]
        set_state(None, release, State.SUPERSEDED, action="release.superseded", reason=reason,
                  after={"episodes_removed": sorted(withdrawn & {i.episode_index for i in release.items.all()}),
                         "withdrawal": withdrawal})
        if not kept:
            return None
        study = Study.objects.select_for_update(no_key=True).get(pk=release.study_id)  # serialises the numbers
        number = (ReleaseRequest.objects.aggregate(last=Max("number"))["last"] or 0) + 1
        now = timezone.now()
        named = {"release_id": release.release_id, "number": release.number,
                 "manifest_sha256": release.manifest_sha256, "withdrawal": withdrawal} if withdrawal else {}
        successor = ReleaseRequest.objects.create(
            study=study, number=number, purpose=release.purpose, requested_by=release.requested_by,
            study_code=release.study_code, requested_by_name=release.requested_by_name,
            face_policy=release.face_policy,
            approvals_required=release.approvals_required or study.approvals_required, supersedes=release,
            episode_count=len(kept), state=State.AWAITING_APPROVAL, submitted_at=now,
            manifest_sha256="", superseding=named)
        items = ReleaseItem.objects.bulk_create(
            ReleaseItem(study=study, request=successor, **{name: getattr(item, name) for name in _COPIED})
            for item in kept)
        carried = _carried(release, successor) if study.carry_over_approvals and withdrawal else []
        if carried:
            successor.superseding = {**named, "carried_approvals": [_entry(a) for a in carried]}
        successor.manifest_sha256 = manifest.section_digest(successor, items)
        successor.save(update_fields=["manifest_sha256", "superseding"])
        record(None, "release.requested", successor, after={
            "state": successor.state, "supersedes": release.release_id, "reason": reason, "withdrawal": withdrawal,
            "approvals_required": successor.approvals_required, "carries_approvals": bool(carried),
            "episodes": [item.folder for item in items], "manifest_sha256": successor.manifest_sha256})
        if carried:
            _carry_over(release, successor, carried)
        successor.refresh_from_db(fields=["state"])
        if successor.state == State.AWAITING_APPROVAL:
            notices.release_moved(None, successor)  # its officers are told it waits for their review
        return successor


def _entry(approval: Approval) -> dict:
    return {"officer": approval.officer_name, "approved_at": rfc3339(approval.approved_at),
            "manifest_sha256": approval.manifest_sha256}


def _carried(release: ReleaseRequest, successor: ReleaseRequest) -> list[Approval]:
    """The superseded release's approvals its successor carries: all of them, when the successor's gate passes now
    and they are as many as it needs; else none (it waits for the officers' review, and the audit log says why)."""
    approvals = list(Approval.objects.filter(request=release, manifest_sha256=release.manifest_sha256))
    checklist = gate.evaluate(successor)
    officers = len({approval.officer_id for approval in approvals})
    if not checklist.passed or officers < (successor.approvals_required or 0):
        record(None, "release.approvals_not_carried", successor, after={
            "gate": checklist.failures(), "approvals": officers, "needed": successor.approvals_required})
        return []
    return approvals


def _carry_over(release: ReleaseRequest, successor: ReleaseRequest, carried: list[Approval]) -> None:
    """Each approval as the officer gave it (the digest they approved, their time), naming the one it carries;
    then the successor is approved and queued for release."""
    for approval in carried:
        Approval.objects.create(study=successor.study, request=successor, officer_id=approval.officer_id,
                                officer_name=approval.officer_name, approved_at=approval.approved_at,
                                manifest_sha256=approval.manifest_sha256, carried_over_from=approval)
        record(None, "release.approval_carried_over", successor, after={
            **_entry(approval), "from": release.release_id, "successor_manifest_sha256": successor.manifest_sha256})
    set_state(None, successor, State.APPROVED, action="release.approved", decided_at=timezone.now(),
              after={"carried_over_from": release.release_id, "withdrawal": successor.superseding.get("withdrawal")})
    queue.enqueue("releases.publish_release", successor.pk)


def reject_open(release: ReleaseRequest, *, reason: str) -> bool:
    """Reject a draft or a request awaiting approval that holds a withdrawn demonstrator's episode (the system
    does it, with the reason); False when it is no longer open."""
    with transaction.atomic():
        lock_fresh(release)
        if release.state not in ReleaseRequest.OPEN:
            return False
        set_state(None, release, State.REJECTED, action="release.rejected", reason=reason,
                  decided_at=timezone.now(), after={"withdrawn_by_requester": False, "after_withdrawal": True})
        return True
