"""Granting and revoking per-study roles."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction

from portal.access.models import Role, RoleGrant, researcher_end_problem
from portal.audit.services import record


def _snapshot(grant: RoleGrant) -> dict:
    return {"user": grant.user.get_username(), "study": grant.study.code, "role": grant.role,
            "expires_at": grant.expires_at}


def _granted_by(actor):
    return actor if getattr(actor, "is_authenticated", False) else None


@transaction.atomic
def grant_role(actor, user, study, role: str, *, expires_at: datetime | None = None,
               access_request=None) -> RoleGrant:
    """Give ``user`` the ``role`` in ``study`` (or change the expiry of the grant they hold).

    A researcher grant needs ``expires_at``, at most ``CERES_ACCESS_MAX_DAYS`` away. ``access_request`` is the
    access-request decision making it (none: an administrator's); the grant names the decision that set its
    expiry last.

    Each grant and each change of expiry is one ``access.role_granted`` event (a change with before and
    after). A grant that changes nothing (the same expiry again, or the loser of two identical grants at
    once) records nothing and returns the grant as it is.
    """
    if role not in Role.values:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(Role.values)}")
    grant = RoleGrant.objects.select_for_update(no_key=True).filter(user=user, study=study, role=role).first()
    changed = grant is None or grant.expires_at != expires_at
    problem = researcher_end_problem(expires_at) if role == Role.RESEARCHER and changed else None
    if problem:
        raise ValueError(problem)
    if grant is None:
        try:
            with transaction.atomic():  # two grants of the same new role at once: the second changes the first
                grant = RoleGrant.objects.create(user=user, study=study, role=role, expires_at=expires_at,
                                                 granted_by=_granted_by(actor), access_request=access_request)
        except IntegrityError:
            grant = RoleGrant.objects.select_for_update(no_key=True).get(user=user, study=study, role=role)
        else:
            record(actor, "access.role_granted", grant, after=_snapshot(grant), study=study)
            return grant
    if grant.expires_at == expires_at:
        if access_request is not None and grant.access_request_id != access_request.pk:  # now this decision's
            grant.access_request = access_request
            grant.save(update_fields=["access_request"])
        return grant
    before = _snapshot(grant)
    grant.expires_at = expires_at
    grant.granted_by = _granted_by(actor)
    grant.access_request = access_request
    grant.save()
    record(actor, "access.role_granted", grant, before=before, after=_snapshot(grant), study=study)
    return grant


@transaction.atomic
def revoke_role(actor, grant: RoleGrant) -> None:
    before = _snapshot(grant)
    record(actor, "access.role_revoked", grant, before=before, study=grant.study)
    grant.delete()
