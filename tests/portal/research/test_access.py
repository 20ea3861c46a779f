"""Access requests, the data-use agreement and the live check: who gets a link, who does not, and why."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_scopes import scope

from portal.access.models import Role, RoleGrant
from portal.audit.models import AuditEvent
from portal.research.exceptions import AccessRefused, ResearchError
from portal.research.models import AccessRequest, AgreementAcceptance
from portal.research.services import access
from portal.studies.services.study import publish_data_use_agreement

pytestmark = pytest.mark.django_db
State = AccessRequest.State


def actions(target) -> list[str]:
    return list(AuditEvent.objects.filter(target_type=f"{target._meta.app_label}.{target._meta.model_name}",
                                          target_id=str(target.pk)).order_by("seq").values_list("action", flat=True))


def test_a_request_records_the_accepted_version_and_digest_and_a_grant_gives_an_expiring_role(reg, agreement,
                                                                                              make_user):
    user = make_user("r1")
    made = access.request_access(user, reg.study, purpose="grasp policy", version=agreement.version,
                                 sha256=agreement.sha256)
    assert made.state == State.PENDING
    assert (made.acceptance.version, made.acceptance.sha256) == (1, agreement.sha256)
    with pytest.raises(AccessRefused, match="no researcher grant"):
        access.check_access(user, reg.study)

    until = timezone.now() + timedelta(days=10)
    access.grant_access(reg.ethics, made, expires_at=until)
    grant = RoleGrant.objects.get(user=user, study=reg.study, role=Role.RESEARCHER)
    assert grant.expires_at == until
    assert access.check_access(user, reg.study).version == 1
    assert actions(made) == ["research.access_requested", "research.access_granted"]
    accepted = AgreementAcceptance.objects.get(user=user)
    assert actions(accepted) == ["research.agreement_accepted"]
    event = AuditEvent.objects.get(action="research.access_granted")
    assert event.before["state"] == "pending" and event.after["state"] == "granted"


def test_the_text_shown_must_be_the_current_agreement(reg, agreement, make_user):
    user = make_user("r1")
    publish_data_use_agreement(reg.coordinator, reg.study, text=agreement.text + " Version two.")
    with pytest.raises(ResearchError, match="changed while you read it: version 2 is current"):
        access.request_access(user, reg.study, purpose="x", version=1, sha256=agreement.sha256)
    assert not AccessRequest.objects.exists() and not AgreementAcceptance.objects.exists()


def test_a_study_without_an_agreement_takes_no_request(reg, make_user):
    with pytest.raises(ResearchError, match="has not published a data-use agreement"):
        access.request_access(make_user("r1"), reg.study, purpose="x", version=1, sha256="0" * 64)


def test_one_request_waits_at_a_time(reg, agreement, make_user):
    user = make_user("r1")
    access.request_access(user, reg.study, purpose="a", version=1, sha256=agreement.sha256)
    with pytest.raises(ResearchError, match="already asked"):
        access.request_access(user, reg.study, purpose="b", version=1, sha256=agreement.sha256)


def test_no_one_decides_their_own_request_and_only_stewards_decide(reg, agreement, make_user):
    both = make_user("both", reg.study, ["coordinator"])
    made = access.request_access(both, reg.study, purpose="x", version=1, sha256=agreement.sha256)
    with pytest.raises(AccessRefused, match="your own access"):
        access.grant_access(both, made, expires_at=timezone.now() + timedelta(days=1))
    outsider = make_user("outsider")
    with pytest.raises(AccessRefused, match="only a coordinator or ethics officer"):
        access.grant_access(outsider, made, expires_at=timezone.now() + timedelta(days=1))
    made.refresh_from_db()
    assert made.state == State.PENDING


def test_grants_need_an_end_within_the_limit(reg, agreement, make_user, settings):
    made = access.request_access(make_user("r1"), reg.study, purpose="x", version=1, sha256=agreement.sha256)
    with pytest.raises(ResearchError, match="end in the future"):
        access.grant_access(reg.coordinator, made, expires_at=timezone.now() - timedelta(minutes=1))
    with pytest.raises(ResearchError, match=f"at most {settings.CERES_ACCESS_MAX_DAYS} days"):
        access.grant_access(reg.coordinator, made, expires_at=timezone.now() + timedelta(days=400))


def test_refusal_and_revocation_need_a_reason_and_revocation_ends_the_grant(reg, agreement, make_user, researcher):
    made = access.request_access(make_user("r2"), reg.study, purpose="x", version=1, sha256=agreement.sha256)
    with pytest.raises(ResearchError, match="give a reason"):
        access.refuse_access(reg.coordinator, made, reason=" ")
    access.refuse_access(reg.coordinator, made, reason="purpose unclear")
    assert AccessRequest.objects.get(pk=made.pk).state == State.REFUSED

    granted = AccessRequest.objects.get(researcher=researcher)
    access.revoke_access(reg.ethics, granted, reason="left the project")
    assert AccessRequest.objects.get(pk=granted.pk).state == State.REVOKED
    assert not RoleGrant.objects.filter(user=researcher, role=Role.RESEARCHER).exists()
    with pytest.raises(AccessRefused, match="no researcher grant"):
        access.check_access(researcher, reg.study)
    assert actions(granted)[-1] == "research.access_revoked"


def test_an_expired_grant_and_a_new_agreement_version_each_stop_the_live_check(reg, researcher):
    assert access.check_access(researcher, reg.study)
    later = timezone.now() + timedelta(days=31)
    with pytest.raises(AccessRefused, match=r"grant in study .* ended on"):
        access.check_access(researcher, reg.study, now=later)

    second = publish_data_use_agreement(reg.coordinator, reg.study, text="Version two of the agreement.")
    with pytest.raises(AccessRefused, match=r"accept version 2 .* first \(you accepted version 1\)"):
        access.check_access(researcher, reg.study)
    access.accept_agreement(researcher, reg.study, version=2, sha256=second.sha256)
    assert access.check_access(researcher, reg.study).version == 2


def test_acceptances_are_append_only(researcher):
    from portal.core.append_only import AppendOnlyError

    accepted = AgreementAcceptance.objects.get(user=researcher)
    with pytest.raises(AppendOnlyError):
        accepted.save()
    with pytest.raises(AppendOnlyError):
        AgreementAcceptance.objects.all().delete()


def test_studies_open_to_a_researcher(reg, agreement, make_user, make_study):
    user = make_user("r1")
    make_study(f"{reg.study.code}-draft", status="draft")
    with scope(study=reg.study):
        assert list(access.studies_open_to(user)) == [reg.study]
    access.request_access(user, reg.study, purpose="x", version=1, sha256=agreement.sha256)
    assert list(access.studies_open_to(user)) == []


def test_every_researcher_grant_has_an_end_whatever_path_makes_it(reg, client, make_user, settings):
    """The service, the admin's add and change forms, and a row written through the ORM all refuse a researcher
    grant without an end (the service and the forms also one further off than an access decision may give),
    naming what is wrong; nothing is written."""
    from django.db import IntegrityError, transaction

    from portal.access.services import grant_role

    needs_an_end = "a researcher grant needs an end: set its expiry"
    bob = make_user(f"{reg.study.code}-bob")
    with pytest.raises(ValueError, match="a researcher grant needs an end"):
        grant_role(reg.coordinator, bob, reg.study, Role.RESEARCHER)
    far = timezone.now() + timedelta(days=settings.CERES_ACCESS_MAX_DAYS + 1)  # an end too far off is no end
    with pytest.raises(ValueError, match=f"at most {settings.CERES_ACCESS_MAX_DAYS} days from now"):
        grant_role(reg.coordinator, bob, reg.study, Role.RESEARCHER, expires_at=far)
    with pytest.raises(IntegrityError), transaction.atomic():
        RoleGrant.objects.create(user=bob, study=reg.study, role=Role.RESEARCHER)
    assert not RoleGrant.objects.filter(user=bob).exists()

    admin = make_user(f"{reg.study.code}-siteadmin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    refused = client.post("/admin/access/rolegrant/add/", {
        "user": bob.pk, "study": reg.study.pk, "role": Role.RESEARCHER, "expires_at_0": "", "expires_at_1": ""})
    assert refused.status_code == 200 and needs_an_end in refused.content.decode()
    far = timezone.localtime(far)
    too_far = client.post("/admin/access/rolegrant/add/", {
        "user": bob.pk, "study": reg.study.pk, "role": Role.RESEARCHER,
        "expires_at_0": f"{far:%Y-%m-%d}", "expires_at_1": f"{far:%H:%M:%S}"})
    assert too_far.status_code == 200
    assert f"at most {settings.CERES_ACCESS_MAX_DAYS} days from now" in too_far.content.decode()
    assert not RoleGrant.objects.filter(user=bob).exists()

    until = timezone.localtime(timezone.now() + timedelta(days=5)).replace(microsecond=0)
    added = client.post("/admin/access/rolegrant/add/", {
        "user": bob.pk, "study": reg.study.pk, "role": Role.RESEARCHER,
        "expires_at_0": f"{until:%Y-%m-%d}", "expires_at_1": f"{until:%H:%M:%S}"})
    assert added.status_code == 302
    grant = RoleGrant.objects.get(user=bob, role=Role.RESEARCHER)
    assert grant.expires_at == until and grant.access_request_id is None
    cleared = client.post(f"/admin/access/rolegrant/{grant.pk}/change/", {"expires_at_0": "", "expires_at_1": ""})
    assert cleared.status_code == 200 and needs_an_end in cleared.content.decode()
    assert RoleGrant.objects.get(pk=grant.pk).expires_at == until
    with pytest.raises(IntegrityError), transaction.atomic():
        RoleGrant.objects.filter(pk=grant.pk).update(expires_at=None)

    # Other roles may still be open-ended.
    assert grant_role(reg.coordinator, bob, reg.study, Role.COORDINATOR).expires_at is None


def test_a_revocation_removes_only_what_that_decision_granted(reg, agreement, make_user, client):
    """Two granted requests of one researcher share the study's one researcher grant; revoking the one whose end
    it no longer carries leaves it; revoking the one it carries falls back to the other's end while it runs; an
    end set in the admin is the administrator's, and no revocation of a request removes it."""
    user = make_user(f"{reg.study.code}-twice")

    def ask_and_grant(days: int) -> AccessRequest:
        asked = access.request_access(user, reg.study, purpose="grasp policy", version=agreement.version,
                                      sha256=agreement.sha256)
        return access.grant_access(reg.coordinator, asked, expires_at=timezone.now() + timedelta(days=days))

    def held():
        grant = RoleGrant.objects.filter(user=user, study=reg.study, role=Role.RESEARCHER).first()
        return grant and (grant.expires_at, grant.access_request_id)

    first = ask_and_grant(10)
    assert held() == (first.expires_at, first.pk)
    second = ask_and_grant(20)
    assert held() == (second.expires_at, second.pk)

    access.revoke_access(reg.ethics, first, reason="the first project ended")
    assert held() == (second.expires_at, second.pk)  # still there: the second decision made its end
    access.check_access(user, reg.study)

    third = ask_and_grant(30)
    access.revoke_access(reg.ethics, third, reason="asked for too long")
    assert held() == (second.expires_at, second.pk)  # back to the end the second decision gave, still running

    access.revoke_access(reg.ethics, second, reason="left the project")
    assert held() is None
    with pytest.raises(AccessRefused, match="no researcher grant"):
        access.check_access(user, reg.study)

    # An administrator's change of the end makes the grant theirs: revoking the request leaves it.
    fourth = ask_and_grant(10)
    admin = make_user(f"{reg.study.code}-siteadmin2")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    grant = RoleGrant.objects.get(user=user, study=reg.study, role=Role.RESEARCHER)
    until = timezone.localtime(timezone.now() + timedelta(days=3)).replace(microsecond=0)
    changed = client.post(f"/admin/access/rolegrant/{grant.pk}/change/", {
        "expires_at_0": f"{until:%Y-%m-%d}", "expires_at_1": f"{until:%H:%M:%S}"})
    assert changed.status_code == 302
    assert held() == (until, None)
    access.revoke_access(reg.ethics, fourth, reason="the administrator decides this one")
    assert held() == (until, None)
