"""How many distinct ethics officers' approvals a release of a study needs: part of what the officers decide
under, so only the study's ethics officers change it. One officer may set 2 or more; fewer than 2 waits for a
second ethics officer's confirmation (never the one who proposed it). Each step is an audit event naming who
proposed and who confirmed. The settings page calls these functions; nothing else changes the number.

A request freezes the number when it is submitted (``releases.services.release_requests.submit``): a change made after
that, by anyone, does not lower the bar for a request already before the officers.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.studies.exceptions import RegistryError, StudyError
from portal.studies.models import Study
from portal.studies.services.study import _locked, _snapshot

# Below this, one officer's word is not enough: a second ethics officer confirms.
ALONE_AT_LEAST = 2
MOST = 20


class ApprovalPolicyRefused(StudyError):
    """The caller may not change (or confirm a change of) the study's approvals policy."""

    status = 403


def _require_officer(actor, study: Study, what: str) -> None:
    if not getattr(actor, "is_authenticated", False) or not has_role(actor, study, Role.ETHICS_OFFICER):
        raise ApprovalPolicyRefused(f"only an ethics officer of study {study.code} can {what}")


def _check_number(approvals) -> int:
    if isinstance(approvals, bool) or not isinstance(approvals, int):
        raise RegistryError(f"the number of approvals must be a whole number, not {approvals!r}")
    if approvals < 1:
        raise RegistryError("a release needs at least one ethics officer's approval")
    if approvals > MOST:
        raise RegistryError(f"a release can need at most {MOST} approvals")
    return approvals


def _clear_pending(study: Study) -> None:
    study.pending_approvals_required = study.pending_approvals_by = study.pending_approvals_at = None


def _policy(study: Study) -> dict:
    return {**_snapshot(study), "pending_approvals_required": study.pending_approvals_required,
            "pending_approvals_by": study.pending_approvals_by.get_username() if study.pending_approvals_by else None}


FIELDS = ["approvals_required", "pending_approvals_required", "pending_approvals_by", "pending_approvals_at"]


def _copy(locked: Study, study: Study) -> Study:
    for name in FIELDS:
        setattr(study, name, getattr(locked, name))
    return locked


@transaction.atomic
def set_approvals_required(actor, study: Study, approvals: int) -> Study:
    """An ethics officer of ``study`` sets how many distinct ethics officers must approve its releases: 2 or
    more at once; fewer than 2 is proposed and waits for another officer's ``confirm_approvals_required``. A new
    setting replaces a proposal still waiting."""
    _require_officer(actor, study, "change how many approvals its releases need")
    approvals = _check_number(approvals)
    locked = _locked(study)
    before = _policy(locked)
    if approvals >= ALONE_AT_LEAST:
        locked.approvals_required = approvals
        _clear_pending(locked)
        locked.save(update_fields=FIELDS)
        record(actor, "study.approvals_required_changed", locked, before=before,
               after={**_policy(locked), "changed_by": actor.get_username()})
    else:
        locked.pending_approvals_required, locked.pending_approvals_by = approvals, actor
        locked.pending_approvals_at = timezone.now()
        locked.save(update_fields=FIELDS)
        record(actor, "study.approvals_required_proposed", locked, before=before,
               after={**_policy(locked), "proposed_by": actor.get_username()})
    return _copy(locked, study)


@transaction.atomic
def confirm_approvals_required(actor, study: Study, approvals: int) -> Study:
    """A second ethics officer confirms the proposal waiting for ``study``; ``approvals`` is the number they were
    shown, so a proposal changed in between is not confirmed unseen."""
    _require_officer(actor, study, "confirm a change of how many approvals its releases need")
    locked = _locked(study)
    pending = locked.pending_approvals_required
    if pending is None:
        raise RegistryError(f"no change of study {locked.code}'s approvals awaits confirmation")
    if approvals != pending:
        raise RegistryError(f"the change awaiting confirmation is to {pending} approval(s), not {approvals!r}; "
                            f"reload the settings page and look again")
    proposer = locked.pending_approvals_by
    if proposer is not None and proposer.pk == actor.pk:
        raise ApprovalPolicyRefused("you proposed this change; another ethics officer of the study must confirm it")
    if proposer is None or not has_role(proposer, locked, Role.ETHICS_OFFICER):
        raise ApprovalPolicyRefused("the officer who proposed this change is no longer an ethics officer of the "
                                    "study; propose it again")
    before = _policy(locked)
    locked.approvals_required = pending
    _clear_pending(locked)
    locked.save(update_fields=FIELDS)
    record(actor, "study.approvals_required_changed", locked, before=before,
           after={**_policy(locked), "proposed_by": proposer.get_username(), "confirmed_by": actor.get_username()})
    return _copy(locked, study)
