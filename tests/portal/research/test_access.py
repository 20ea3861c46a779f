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
