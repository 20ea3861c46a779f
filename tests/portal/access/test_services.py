"""The access services (services.py, ``grant_role`` and ``revoke_role``): granting a role, changing its expiry
and revoking it are each one audit event with the right before and after, through the service and through the
admin; a grant that changes nothing is no event."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from portal.access.models import RoleGrant
from portal.access.services import grant_role, revoke_role
from portal.audit.models import AuditEvent
from portal.audit.services import verify_chain

IN_2030 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
IN_2031 = datetime(2031, 6, 30, 8, 30, tzinfo=UTC)


def _last_seq() -> int:
    last = AuditEvent.objects.order_by("-seq").first()
    return last.seq if last else 0


def _events_since(seq: int) -> list[tuple]:
    return [(e.action, e.actor_label, e.target_id, e.study_id, e.before, e.after)
            for e in AuditEvent.objects.filter(seq__gt=seq).order_by("seq")]


def _state(expires_at: str | None) -> dict:
    return {"user": "bob", "study": "alpha", "role": "coordinator", "expires_at": expires_at}


@pytest.fixture
def bob(make_user):
    return make_user("bob")


def test_through_the_service(bob, study, make_user):
    admin = make_user("siteadmin")

    seq = _last_seq()
    grant = grant_role(admin, bob, study, "coordinator")
    pk = str(grant.pk)
    assert _events_since(seq) == [("access.role_granted", "siteadmin", pk, study.pk, None, _state(None))]

    seq = _last_seq()
    again = grant_role(admin, bob, study, "coordinator")
    assert again.pk == grant.pk and again.expires_at is None
    assert _events_since(seq) == [], "the same grant again changes nothing and records nothing"

    seq = _last_seq()
    grant_role(admin, bob, study, "coordinator", expires_at=IN_2030)
    assert _events_since(seq) == [("access.role_granted", "siteadmin", pk, study.pk,
                                   _state(None), _state("2030-01-01T12:00:00Z"))]

    seq = _last_seq()
    same = grant_role("someone-else", bob, study, "coordinator", expires_at=IN_2030)
    assert same.pk == grant.pk and same.granted_by == admin, "nothing changed, not even who granted it"
    assert _events_since(seq) == []

    seq = _last_seq()
    grant_role(admin, bob, study, "coordinator", expires_at=IN_2031)
    assert _events_since(seq) == [("access.role_granted", "siteadmin", pk, study.pk,
                                   _state("2030-01-01T12:00:00Z"), _state("2031-06-30T08:30:00Z"))]

    seq = _last_seq()
    revoke_role(admin, RoleGrant.objects.get(pk=grant.pk))
    assert _events_since(seq) == [("access.role_revoked", "siteadmin", pk, study.pk,
                                   _state("2031-06-30T08:30:00Z"), None)]
    assert not RoleGrant.objects.filter(pk=grant.pk).exists()
    assert verify_chain()[1] is None


def test_through_the_admin(client, bob, study, make_user):
    admin = make_user("siteadmin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)

    seq = _last_seq()
    added = client.post("/admin/access/rolegrant/add/", {
        "user": bob.pk, "study": study.pk, "role": "coordinator", "expires_at_0": "", "expires_at_1": ""})
    assert added.status_code == 302, added.content[:2000]
    grant = RoleGrant.objects.get(user=bob, study=study, role="coordinator")
    pk = str(grant.pk)
    assert _events_since(seq) == [("access.role_granted", "siteadmin", pk, study.pk, None, _state(None))]
    change = f"/admin/access/rolegrant/{grant.pk}/change/"

    steps = [
        (("", ""), None),  # saved without a change
        (("2030-01-01", "12:00:00"), (_state(None), _state("2030-01-01T12:00:00Z"))),
        (("2030-01-01", "12:00:00"), None),
        (("2031-06-30", "08:30:00"), (_state("2030-01-01T12:00:00Z"), _state("2031-06-30T08:30:00Z"))),
    ]
    for (day, time), change_made in steps:
        seq = _last_seq()
        answer = client.post(change, {"expires_at_0": day, "expires_at_1": time})
        assert answer.status_code == 302, (day, time, answer.content[:2000])
        expected = [("access.role_granted", "siteadmin", pk, study.pk, *change_made)] if change_made else []
        assert _events_since(seq) == expected, (day, time)

    seq = _last_seq()
    assert client.post(f"/admin/access/rolegrant/{grant.pk}/delete/", {"post": "yes"}).status_code == 302
    assert _events_since(seq) == [("access.role_revoked", "siteadmin", pk, study.pk,
                                   _state("2031-06-30T08:30:00Z"), None)]
    assert not RoleGrant.objects.filter(pk=grant.pk).exists()
    assert verify_chain()[1] is None
