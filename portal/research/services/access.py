"""Researcher access to a study: accepting its data-use agreement, asking for access, a coordinator's or
ethics officer's grant (a researcher ``RoleGrant`` with an expiry), refusal and revocation, and the live check
every download link and dataset goes through (``check_access``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django_scopes import scopes_disabled

from portal.access.models import Role, RoleGrant
from portal.access.permissions import has_role
from portal.access.services import grant_role, revoke_role
from portal.audit.services import record
from portal.core.fixed_query import FixedQuery
from portal.core.states import transition
from portal.research import notices
from portal.research.exceptions import AccessRefused, ResearchError
from portal.research.models import AccessRequest, AgreementAcceptance
from portal.studies.models import DataUseAgreement, Study
from portal.studies.services.study import current_data_use_agreement

State = AccessRequest.State
PURPOSE_MAX_CHARS = 2000
REASON_MAX_CHARS = 2000


def _snapshot(access: AccessRequest) -> dict:
    return {"state": access.state, "researcher": access.researcher.get_username(), "expires_at": access.expires_at,
            "reason": access.reason, "agreement_version": access.acceptance.version}


def _researcher(user):
    if not getattr(user, "is_authenticated", False):
        raise AccessRefused("sign in first")
    return user


def _requests_open(study: Study) -> tuple[str, DataUseAgreement | None]:
    if study.status == Study.Status.DRAFT:
        return f"study {study.code} is still a draft; it takes no access requests yet", None
    agreement = current_data_use_agreement(study)
    if agreement is None:
        return (f"study {study.code} has not published a data-use agreement; it cannot give access to its data "
                f"yet"), None
    return "", agreement


def closed_to_requests(study: Study) -> str:
    """Why the study takes no access requests ("" when it takes them)."""
    return _requests_open(study)[0]


def open_to_requests(study: Study) -> DataUseAgreement:
    """The agreement a researcher accepts to ask for access; ``ResearchError`` when the study takes no requests."""
    problem, agreement = _requests_open(study)
    if problem:
        raise ResearchError(problem)
    return agreement


def studies_open_to(user) -> QuerySet[Study]:
    """Studies a researcher may ask access to: not drafts, with an agreement published, where ``user`` holds no
    unexpired researcher grant and has no request waiting."""
    now = timezone.now()
    held = RoleGrant.objects.filter(user=user, role=Role.RESEARCHER).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)).values("study")
    waiting = AccessRequest.objects.filter(researcher=user, state=State.PENDING).values("study")
    return (Study.objects.exclude(status=Study.Status.DRAFT).filter(data_use_agreements__isnull=False)
            .exclude(pk__in=held).exclude(pk__in=waiting).distinct().order_by("code"))


@transaction.atomic
def accept_agreement(user, study: Study, *, version: int, sha256: str) -> AgreementAcceptance:
    """Record that ``user`` accepted the agreement text they were shown: its ``version`` and ``sha256`` must be
    those of the study's current agreement (else the text changed while they read it)."""
    _researcher(user)
    agreement = open_to_requests(study)
    if version != agreement.version or sha256 != agreement.sha256:
        raise ResearchError(f"the data-use agreement of study {study.code} changed while you read it: version "
                            f"{agreement.version} is current now; read it and accept it again")
    accepted = AgreementAcceptance.objects.filter(user=user, agreement=agreement).first()
    if accepted is not None:
        return accepted
    try:
        with transaction.atomic():
            accepted = AgreementAcceptance.objects.create(study=study, user=user, agreement=agreement,
                                                          version=agreement.version, sha256=agreement.sha256)
    except IntegrityError:  # the same person accepting twice at once: one acceptance
        return AgreementAcceptance.objects.get(user=user, agreement=agreement)
    record(user, "research.agreement_accepted", accepted, study=study,
           after={"version": accepted.version, "sha256": accepted.sha256})
    return accepted


def latest_acceptance(user, study: Study) -> AgreementAcceptance | None:
    return (AgreementAcceptance.objects.filter(user=user, study=study).select_related("agreement")
            .order_by("-version", "-pk").first())


@transaction.atomic
def request_access(user, study: Study, *, purpose: str, version: int, sha256: str) -> AccessRequest:
    """A researcher asks for access with a purpose, accepting the agreement version they were shown."""
    _researcher(user)
    purpose = purpose.strip()
    if not purpose:
        raise ResearchError("say what you will use the data for (the purpose is empty)")
    if len(purpose) > PURPOSE_MAX_CHARS:
        raise ResearchError(f"the purpose is longer than {PURPOSE_MAX_CHARS} characters")
    waiting = ResearchError(f"you already asked for access to study {study.code}; wait for the decision or "
                            f"cancel that request first")
    if AccessRequest.objects.filter(study=study, researcher=user, state=State.PENDING).exists():
        raise waiting
    acceptance = accept_agreement(user, study, version=version, sha256=sha256)
    try:
        with transaction.atomic():  # two requests at once: the second gets the same message as a later one
            access = AccessRequest.objects.create(study=study, researcher=user, purpose=purpose,
                                                  acceptance=acceptance)
    except IntegrityError:
        raise waiting from None
    record(user, "research.access_requested", access, study=study,
           after={**_snapshot(access), "purpose": purpose})
    notices.access_requested(access)
    return access


def _locked(access: AccessRequest) -> AccessRequest:
    locked = AccessRequest.objects.select_for_update(of=("self",), no_key=True).select_related(
        "study", "researcher", "acceptance").get(pk=access.pk)
    access.refresh_from_db()
    return locked


def _require_steward(actor, access: AccessRequest, what: str) -> None:
    study = access.study
    if not (has_role(actor, study, Role.COORDINATOR) or has_role(actor, study, Role.ETHICS_OFFICER)):
        raise AccessRefused(f"only a coordinator or ethics officer of study {study.code} can {what} access")
    if actor.pk == access.researcher_id:
        raise AccessRefused(f"you cannot {what} your own access to study {study.code}; another coordinator or "
                            f"ethics officer decides it")


def _reason(reason: str, what: str) -> str:
    reason = reason.strip()
    if not reason:
        raise ResearchError(f"give a reason to {what}")
    if len(reason) > REASON_MAX_CHARS:
        raise ResearchError(f"the reason is longer than {REASON_MAX_CHARS} characters")
    return reason


@transaction.atomic
def grant_access(actor, access: AccessRequest, *, expires_at: datetime) -> AccessRequest:
    """Grant a waiting request until ``expires_at`` (in the future, at most ``CERES_ACCESS_MAX_DAYS`` away): the
    researcher gets a researcher grant in the study with that expiry."""
    locked = _locked(access)
    _require_steward(actor, locked, "grant")
    now = timezone.now()
    if expires_at <= now:
        raise ResearchError("the access must end in the future")
    longest = timedelta(days=settings.CERES_ACCESS_MAX_DAYS)
    if expires_at - now > longest:
        raise ResearchError(f"access is granted for at most {settings.CERES_ACCESS_MAX_DAYS} days at a time")
    transition(actor, locked, State.GRANTED, action="research.access_granted", snapshot=_snapshot,
               effects=lambda granted: grant_role(actor, granted.researcher, granted.study, Role.RESEARCHER,
                                                  expires_at=expires_at, access_request=granted),
               decided_by=actor, decided_at=now, expires_at=expires_at)
    notices.access_decided(locked)
    access.refresh_from_db()
    return locked


@transaction.atomic
def refuse_access(actor, access: AccessRequest, *, reason: str) -> AccessRequest:
    locked = _locked(access)
    _require_steward(actor, locked, "refuse")
    reason = _reason(reason, "refuse access")
    transition(actor, locked, State.REFUSED, action="research.access_refused", snapshot=_snapshot,
               decided_by=actor, decided_at=timezone.now(), reason=reason)
    notices.access_decided(locked)
    access.refresh_from_db()
    return locked


@transaction.atomic
def revoke_access(actor, access: AccessRequest, *, reason: str) -> AccessRequest:
    """End a granted access now: what this decision granted is removed, so no further link is issued under it.

    Only what it granted: the researcher grant goes if this decision set its expiry; if another granted request
    of the same researcher is still running, the grant falls back to that one's expiry. A grant a later decision
    or an administrator set is left alone (an administrator's is revoked in the admin)."""
    locked = _locked(access)
    _require_steward(actor, locked, "revoke")
    reason = _reason(reason, "revoke access")
    now = timezone.now()
    transition(actor, locked, State.REVOKED, action="research.access_revoked", snapshot=_snapshot,
               effects=lambda revoked: _end_grant(actor, revoked, now), revoked_by=actor, revoked_at=now,
               reason=reason)
    notices.access_decided(locked)
    access.refresh_from_db()
    return locked


def _end_grant(actor, revoked: AccessRequest, now: datetime) -> None:
    """What a revoked decision granted goes: the researcher grant it set is revoked, or falls back to the expiry of
    another granted request of the same researcher still running."""
    grant = RoleGrant.objects.select_for_update(no_key=True).filter(
        user=revoked.researcher, study=revoked.study, role=Role.RESEARCHER, access_request=revoked).first()
    if grant is not None:
        still = (AccessRequest.objects.filter(study=revoked.study, researcher=revoked.researcher, state=State.GRANTED,
                                              expires_at__gt=now).order_by("-expires_at", "-pk").first())
        if still is None:
            revoke_role(actor, grant)
        else:
            grant_role(actor, revoked.researcher, revoked.study, Role.RESEARCHER, expires_at=still.expires_at,
                       access_request=still)


@transaction.atomic
def cancel_request(user, access: AccessRequest) -> AccessRequest:
    """The researcher takes back a request still waiting for a decision."""
    locked = _locked(access)
    if user.pk != locked.researcher_id:
        raise AccessRefused("only the researcher who asked can cancel an access request")
    transition(user, locked, State.CANCELLED, action="research.access_cancelled", snapshot=_snapshot)
    access.refresh_from_db()
    return locked


def researcher_grant(user, study: Study) -> RoleGrant | None:
    return RoleGrant.objects.filter(user=user, study=study, role=Role.RESEARCHER).first()


# The live check's three reads (a page of a researcher's, every link, the viewer): their shapes never change, so
# they are compiled once per process and run with the user and the study (``core.fixed_query``); what they read is
# read anew every time. Each is the query of ``researcher_grant``, ``current_data_use_agreement`` and
# ``latest_acceptance``, narrowed to the columns the check needs.
_GRANT_EXPIRY = FixedQuery(
    lambda user_id, study_id: RoleGrant.objects.filter(user_id=user_id, study_id=study_id, role=Role.RESEARCHER)
    .order_by().values_list("expires_at")[:1],  # (user, study, role) is unique: one row or none
    user_id=(1, 2), study_id=(3, 4))


def _current_agreement_query(study_id: int) -> QuerySet:
    with scopes_disabled():  # the study is a parameter of the query, as the scope would have made it
        return DataUseAgreement.objects.filter(study_id=study_id).order_by("-version").values_list(
            "pk", "version", "sha256")[:1]


_CURRENT_AGREEMENT = FixedQuery(_current_agreement_query, study_id=(1, 2))
_LATEST_ACCEPTANCE = FixedQuery(
    lambda user_id, study_id: AgreementAcceptance.objects.filter(user_id=user_id, study_id=study_id)
    .order_by("-version", "-pk").values_list(*(field.attname for field in AgreementAcceptance._meta.concrete_fields))
    [:1], user_id=(1, 2), study_id=(3, 4))


def _live_check(user, study: Study, now: datetime | None) -> tuple[str, AgreementAcceptance | None]:
    """What the live check refuses ("" when nothing) and, when it passes, the acceptance it relies on."""
    now = now or timezone.now()
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return "sign in first", None
    grant = _GRANT_EXPIRY.rows(user_id=user.pk, study_id=study.pk)  # researcher_grant
    if not grant:
        return f"you hold no researcher grant in study {study.code}; ask for access first", None
    ((expires_at,),) = grant
    if expires_at is not None and expires_at <= now:  # not RoleGrant.is_active(now)
        return (f"your researcher grant in study {study.code} ended on "
                f"{timezone.localtime(expires_at):%Y-%m-%d %H:%M}; ask for access again"), None
    agreement = _CURRENT_AGREEMENT.rows(study_id=study.pk)  # current_data_use_agreement
    if not agreement:
        return f"study {study.code} has no data-use agreement; no data can be given out", None
    ((agreement_id, version, sha256),) = agreement
    accepted = next(iter(_LATEST_ACCEPTANCE.instances(AgreementAcceptance, user_id=user.pk, study_id=study.pk)),
                    None)  # latest_acceptance
    if accepted is None or accepted.agreement_id != agreement_id or accepted.sha256 != sha256:
        held = f" (you accepted version {accepted.version})" if accepted else ""
        return (f"accept version {version} of the data-use agreement of study {study.code} "
                f"first{held}"), None
    return "", accepted


def access_problem(user, study: Study, *, now: datetime | None = None) -> str:
    """Why the live check would refuse ``user`` the study's data now ("" when it would not): what a page shows
    before anyone asks for a file."""
    return _live_check(user, study, now)[0]


def check_access(user, study: Study, *, now: datetime | None = None) -> AgreementAcceptance:
    """The live check of the person behind a download: an unexpired researcher grant in the study and an
    acceptance of its current data-use agreement (version and text). ``AccessRefused`` names what is missing."""
    problem, accepted = _live_check(user, study, now)
    if problem:
        raise AccessRefused(problem)
    return accepted
