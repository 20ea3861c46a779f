"""Four eyes: the one function that approves a release request. The page, the API, the admin action and the
``approve_release`` command all call ``approve``; nothing is ever approved by timeout."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from exporter.timestamps import rfc3339
from portal.access.models import Role
from portal.access.permissions import has_role
from portal.accounts import services as accounts
from portal.accounts.services import AccountError
from portal.audit.services import record
from portal.core import queue
from portal.core.fixed_query import in_study, scoped_study_id
from portal.core.states import lock_fresh
from portal.releases.exceptions import ApprovalRefused, ReleaseError, SecondFactorNeeded
from portal.releases.models import Approval, ReleaseRequest
from portal.releases.services import manifest
from portal.releases.services.gate import require_passing
from portal.releases.services.release_requests import set_state
from portal.studies.models import Study

State = ReleaseRequest.State


@dataclass(frozen=True)
class SecondFactor:
    """What an approver brings for the second factor: when their session last passed it, and/or a code now."""

    passed_at: datetime | None = None
    code: str = ""
    ip: str | None = None


def second_factor_required(study: Study) -> bool:
    return study.approval_second_factor or settings.CERES_REQUIRE_2FA


def awaiting_officer(user) -> QuerySet[ReleaseRequest]:
    """Requests of the study in scope waiting for ``user``'s approval: not theirs, not approved by them yet."""
    return _awaiting(ReleaseRequest.objects.all(), user)


def _awaiting(requests: QuerySet[ReleaseRequest], user) -> QuerySet[ReleaseRequest]:
    return requests.filter(state=State.AWAITING_APPROVAL).exclude(requested_by=user).exclude(approvals__officer=user)


# ``awaiting_officer``'s keys in one study's scope, compiled once per process (``core.fixed_query``): the scoped ORM
# query with the scope's filter written out, run with the study and the officer (tests compare the SQL).
_AWAITING_PKS = in_study(lambda study_id, user_id: _awaiting(ReleaseRequest.objects.filter(study_id=study_id),
                                                             user_id).values_list("pk"), user_id=(1, 2))


def awaiting_officer_pks(user) -> set[int]:
    """The keys of ``awaiting_officer(user)``, read anew on every call (the release requests list marks them)."""
    study_id = scoped_study_id()
    if study_id is None:
        return set(awaiting_officer(user).values_list("pk", flat=True))
    return {pk for (pk,) in _AWAITING_PKS.rows(study_id=study_id, user_id=user.pk)}


def _check_second_factor(user, study: Study, evidence: SecondFactor) -> str:
    """How the second factor was satisfied ("not required", "fresh", "code"); ``SecondFactorNeeded`` otherwise.

    Fresh: the session passed it within ``CERES_APPROVAL_SECOND_FACTOR_MINUTES``; else a code from the
    authenticator comes with the approval (checked, throttled and audited like a sign-in code)."""
    if not second_factor_required(study):
        return "not required"
    minutes = settings.CERES_APPROVAL_SECOND_FACTOR_MINUTES
    if evidence.passed_at is not None and timezone.now() - evidence.passed_at <= timedelta(minutes=minutes):
        return "fresh"
    if accounts.confirmed_device(user) is None:
        raise SecondFactorNeeded("approving a release needs a second factor: set one up on your account page first")
    if not evidence.code:
        raise SecondFactorNeeded(f"approving a release of study {study.code} needs a second factor passed within "
                                 f"the last {minutes} minutes: enter the current code from your authenticator app")
    try:
        accounts.check_second_factor(user, evidence.code, ip=evidence.ip)
    except AccountError as exc:
        raise SecondFactorNeeded(f"second factor refused: {exc}") from None
    return "code"


def approve(actor, release: ReleaseRequest, *, manifest_sha256: str,
            second_factor: SecondFactor = SecondFactor()) -> Approval:
    """Record ``actor``'s approval of ``release`` and, once the number of distinct ethics officers frozen on the
    request at submission have approved, mark it approved and queue the release.

    Refused: anyone but an ethics officer of the request's study; the requester (also when they hold both
    roles); an officer who approved it already (one approval counts once); a manifest digest other than the
    request's (what the officer was shown); a request not awaiting approval; any failing gate check; a second
    factor that is not fresh when the study or ``CERES_REQUIRE_2FA`` asks for one. The request's row is locked,
    so officers approving at the same instant are counted one after the other.
    """
    study = release.study
    if not getattr(actor, "is_authenticated", False):
        raise ApprovalRefused("an approval needs a signed-in ethics officer")
    if not has_role(actor, study, Role.ETHICS_OFFICER):
        raise ApprovalRefused(f"only an ethics officer of study {study.code} can approve its releases")
    if actor.pk == release.requested_by_id:
        raise ApprovalRefused(f"you asked for {release.release_id}; another ethics officer must approve it "
                              f"(four eyes)")
    how = _check_second_factor(actor, study, second_factor)
    with transaction.atomic():
        lock_fresh(release)
        if release.state != State.AWAITING_APPROVAL:
            raise ReleaseError(f"{release.release_id} is {release.get_state_display().lower()}, not awaiting "
                               f"approval")
        # The number frozen when the request was submitted: what the officers decide under.
        required = release.approvals_required
        if required is None:
            raise ReleaseError(f"{release.release_id} holds no number of approvals it needs; it cannot be approved")
        current = manifest.section_digest(release)
        if current != release.manifest_sha256:
            raise ReleaseError(f"{release.release_id}'s manifest no longer has the digest it was made with; "
                               f"it cannot be approved")
        if manifest_sha256 != current:
            raise ApprovalRefused(f"the manifest you approve ({manifest_sha256 or 'none given'}) is not "
                                  f"{release.release_id}'s ({current}); reload the request and review it again")
        earlier = Approval.objects.filter(request=release, officer=actor).first()
        if earlier is not None:
            raise ReleaseError(f"you approved {release.release_id} already, at "
                               f"{earlier.approved_at:%Y-%m-%d %H:%M}; one officer's approval counts once")
        require_passing(release, "approved")
        approval = Approval.objects.create(study=study, request=release, officer=actor,
                                           officer_name=actor.get_username(), approved_at=timezone.now(),
                                           manifest_sha256=current)
        count = Approval.objects.filter(request=release).count()
        record(actor, "release.approval_given", release, after={
            "officer": approval.officer_name, "manifest_sha256": current, "approved_at": rfc3339(approval.approved_at),
            "approvals": count, "required": required, "second_factor": how})
        if count >= required:
            officers = list(Approval.objects.filter(request=release).values_list("officer_name", flat=True))
            set_state(actor, release, State.APPROVED, action="release.approved", decided_at=approval.approved_at,
                      after={"approved_by": officers})
            queue.enqueue("releases.publish_release", release.pk)
    return approval
