"""Releases after a consent withdrawal: a published release that held a withdrawn demonstrator's episodes is
superseded by a new request holding its other episodes (frozen as they were: same receipts, same files, the
stored shards already read for the gate). By default the new request goes back to the ethics officers'
review; with the study's ``carry_over_approvals`` it keeps the superseded release's approvals (each recorded
again with the new manifest's digest, naming the approval it carries) and is released at once, provided its
gate passes now. Requests still open that hold such episodes are rejected with the reason."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from exporter.shard import rfc3339
from portal.audit.services import record
from portal.core import queue
from portal.notifications import events
from portal.releases.models import Approval, ReleaseItem, ReleaseRequest
from portal.releases.services import gate, manifest
from portal.releases.services.requests import lock_fresh, set_state
from portal.studies.models import Study

State = ReleaseRequest.State
_COPIED = ("episode", "episode_index", "capture_id", "receipt_sha256", "files", "inspected_at", "video_has_audio",
           "leaks", "inspection_error")


def supersede(request: ReleaseRequest, withdrawn: set[int], *, reason: str) -> ReleaseRequest | None:
    """Mark the published ``request`` superseded and make the request of its episodes not in ``withdrawn`` (None
    when none is left). Idempotent: a request superseded already returns its successor."""
    with transaction.atomic():
        lock_fresh(request)
        if request.state == State.SUPERSEDED:
            return ReleaseRequest.objects.filter(supersedes=request).first()
        kept = [item for item in request.items.select_related("episode__recording") if
                item.episode_index not in withdrawn]
        set_state(None, request, State.SUPERSEDED, action="release.superseded", reason=reason,
                  after={"episodes_removed": sorted(withdrawn & {i.episode_index for i in request.items.all()})})
        if not kept:
            return None
        study = Study.objects.select_for_update(no_key=True).get(pk=request.study_id)  # serialises the numbers
        number = (ReleaseRequest.objects.aggregate(last=Max("number"))["last"] or 0) + 1
        now = timezone.now()
        successor = ReleaseRequest.objects.create(
            study=study, number=number, purpose=request.purpose, requested_by=request.requested_by,
            study_code=request.study_code, requested_by_name=request.requested_by_name,
            approvals_required=request.approvals_required or study.approvals_required, supersedes=request,
            episode_count=len(kept), state=State.AWAITING_APPROVAL, submitted_at=now,
            manifest_sha256="")
        items = ReleaseItem.objects.bulk_create(
            ReleaseItem(study=study, request=successor, **{name: getattr(item, name) for name in _COPIED})
            for item in kept)
        successor.manifest_sha256 = manifest.section_digest(successor, items)
        successor.save(update_fields=["manifest_sha256"])
        record(None, "release.requested", successor, after={
            "state": successor.state, "supersedes": request.release_id, "reason": reason,
            "approvals_required": successor.approvals_required,
            "episodes": [item.folder for item in items], "manifest_sha256": successor.manifest_sha256})
        if study.carry_over_approvals:
            _carry_over(request, successor)
        if successor.state == State.AWAITING_APPROVAL:
            events.release_moved(None, successor)  # its officers are told it waits for their review
        return successor


def _carry_over(request: ReleaseRequest, successor: ReleaseRequest) -> None:
    """The superseded release's approvals, for its successor, when the gate passes now; else it waits for review."""
    checklist = gate.evaluate(successor)
    if not checklist.passed:
        record(None, "release.approvals_not_carried", successor, after={"gate": checklist.failures()})
        return
    now = timezone.now()
    for approval in Approval.objects.filter(request=request):
        carried = Approval.objects.create(study=successor.study, request=successor, officer_id=approval.officer_id,
                                          officer_name=approval.officer_name, approved_at=now,
                                          manifest_sha256=successor.manifest_sha256, carried_over_from=approval)
        record(None, "release.approval_carried_over", successor, after={
            "officer": approval.officer_name, "approved_at": rfc3339(carried.approved_at), "from": request.release_id,
            "manifest_sha256": successor.manifest_sha256})
    set_state(None, successor, State.APPROVED, action="release.approved", decided_at=now,
              after={"carried_over_from": request.release_id})
    queue.enqueue("releases.publish_release", successor.pk)


def reject_open(request: ReleaseRequest, *, reason: str) -> bool:
    """Reject a draft or a request awaiting approval that holds a withdrawn demonstrator's episode (the system
    does it, with the reason); False when it is no longer open."""
    with transaction.atomic():
        lock_fresh(request)
        if request.state not in ReleaseRequest.OPEN:
            return False
        set_state(None, request, State.REJECTED, action="release.rejected", reason=reason,
                  decided_at=timezone.now(), after={"withdrawn_by_requester": False, "after_withdrawal": True})
        return True
