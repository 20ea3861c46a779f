"""How many approvals a release needs is the ethics officers' decision: a coordinator cannot change it, one
officer cannot take it below 2 alone, and every change is an audit event naming who proposed and who confirmed.
(That a request keeps the number it was submitted under: ``tests/portal/releases/test_frozen_approvals.py``.)"""

from __future__ import annotations

import pytest

from portal.access.models import RoleGrant
from portal.access.services import revoke_role
from portal.audit.models import AuditEvent
from portal.studies.exceptions import RegistryError
from portal.studies.services.approval_policy import (
    ApprovalPolicyRefused,
    confirm_approvals_required,
    set_approvals_required,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def officers(make_user, study):
    return (make_user("officer1", study, ["ethics_officer"]), make_user("officer2", study, ["ethics_officer"]))


def reload(study):
    study.refresh_from_db()
    return study


def test_a_coordinator_cannot_change_it_through_the_service_or_the_page(study, coordinator, client):
    with pytest.raises(ApprovalPolicyRefused, match="only an ethics officer of study"):
        set_approvals_required(coordinator, study, 1)
    client.force_login(coordinator)
    assert client.post(f"/studies/{study.code}/settings/approvals/", {"approvals_required": "1"}).status_code == 403
    assert client.post(f"/studies/{study.code}/settings/approvals/confirm/",
                       {"approvals_required": "1"}).status_code == 403
    assert reload(study).approvals_required == 2
    assert not AuditEvent.objects.filter(action__startswith="study.approvals_required").exists()


def test_one_officer_sets_two_or_more_at_once_audited_with_their_name(study, officers):
    set_approvals_required(officers[0], study, 3)
    assert reload(study).approvals_required == 3
    event = AuditEvent.objects.get(action="study.approvals_required_changed")
    assert (event.before["approvals_required"], event.after["approvals_required"]) == (2, 3)
    assert event.after["changed_by"] == "officer1" and event.actor_label == "officer1"


def test_below_two_waits_for_a_second_officer_and_is_audited_with_both_names(study, officers):
    first, second = officers
    set_approvals_required(first, study, 1)
    study = reload(study)
    assert (study.approvals_required, study.pending_approvals_required, study.pending_approvals_by) == (2, 1, first)
    proposed = AuditEvent.objects.get(action="study.approvals_required_proposed")
    assert (proposed.after["proposed_by"], proposed.after["pending_approvals_required"]) == ("officer1", 1)

    with pytest.raises(ApprovalPolicyRefused, match="you proposed this change"):
        confirm_approvals_required(first, study, 1)
    with pytest.raises(RegistryError, match="is to 1 approval"):
        confirm_approvals_required(second, study, 3)
    assert reload(study).approvals_required == 2

    confirm_approvals_required(second, study, 1)
    study = reload(study)
    assert (study.approvals_required, study.pending_approvals_required, study.pending_approvals_by) == (1, None, None)
    changed = AuditEvent.objects.get(action="study.approvals_required_changed")
    assert (changed.after["proposed_by"], changed.after["confirmed_by"]) == ("officer1", "officer2")
    assert (changed.before["approvals_required"], changed.after["approvals_required"]) == (2, 1)
    with pytest.raises(RegistryError, match="awaits confirmation"):
        confirm_approvals_required(second, study, 1)


def test_a_coordinator_who_is_also_an_officer_needs_another_officer(study, make_user, officers):
    both = make_user("both", study, ["coordinator", "ethics_officer"])
    set_approvals_required(both, study, 1)
    with pytest.raises(ApprovalPolicyRefused, match="you proposed this change"):
        confirm_approvals_required(both, study, 1)
    assert reload(study).approvals_required == 2


def test_a_proposal_is_dropped_by_a_later_setting_and_needs_a_proposer_still_in_office(study, officers):
    first, second = officers
    set_approvals_required(first, study, 1)
    set_approvals_required(second, study, 2)
    assert reload(study).pending_approvals_required is None
    with pytest.raises(RegistryError, match="awaits confirmation"):
        confirm_approvals_required(first, study, 1)

    set_approvals_required(first, study, 1)
    revoke_role("test", RoleGrant.objects.get(user=first, study=study, role="ethics_officer"))
    with pytest.raises(ApprovalPolicyRefused, match="no longer an ethics officer"):
        confirm_approvals_required(second, reload(study), 1)
    assert reload(study).approvals_required == 2


@pytest.mark.parametrize("value", [0, 21, "2", None, True])
def test_a_bad_number_is_refused_naming_it(study, officers, value):
    with pytest.raises(RegistryError, match="approval"):
        set_approvals_required(officers[0], study, value)
    assert reload(study).approvals_required == 2


def test_the_pages_propose_and_confirm(study, officers, coordinator, client):
    first, second = officers
    client.force_login(coordinator)
    page = client.get(f"/studies/{study.code}/settings/").content.decode()
    assert 'id="set-approvals"' not in page and 'id="approval-second-factor"' in page

    client.force_login(first)
    page = client.get(f"/studies/{study.code}/settings/").content.decode()
    assert 'id="set-approvals"' in page and 'id="approval-second-factor"' not in page
    response = client.post(f"/studies/{study.code}/settings/approvals/", {"approvals_required": "1"}, follow=True)
    assert "awaits another ethics officer" in response.content.decode()
    response = client.post(f"/studies/{study.code}/settings/approvals/confirm/", {"approvals_required": "1"})
    assert response.status_code == 400 and "you proposed this change" in response.content.decode()
    assert reload(study).approvals_required == 2

    client.force_login(second)
    page = client.get(f"/studies/{study.code}/settings/").content.decode()
    assert 'id="pending-approvals"' in page and "proposed by officer1" in page
    response = client.post(f"/studies/{study.code}/settings/approvals/confirm/", {"approvals_required": "1"})
    assert response.status_code == 302
    assert reload(study).approvals_required == 1


def test_the_api_calls_the_same_service(study, officers, coordinator, client):
    url = f"/api/studies/{study.code}/approval-policy/"
    client.force_login(coordinator)
    assert client.get(url).json()["approvals_required"] == 2
    response = client.post(url, {"approvals_required": 1}, content_type="application/json")
    assert response.status_code == 403
    first, second = officers
    client.force_login(first)
    answer = client.post(url, {"approvals_required": 1}, content_type="application/json").json()
    assert (answer["approvals_required"], answer["pending_approvals_required"],
            answer["pending_approvals_by"]) == (2, 1, "officer1")
    response = client.post(url + "confirm/", {"approvals_required": 1}, content_type="application/json")
    assert response.status_code == 403 and "you proposed this change" in response.json()["detail"]
    response = client.post(url, {"approvals_required": 0}, content_type="application/json")
    assert response.status_code == 400 and "approvals_required" in response.json()
    client.force_login(second)
    answer = client.post(url + "confirm/", {"approvals_required": 1}, content_type="application/json").json()
    assert (answer["approvals_required"], answer["pending_approvals_required"]) == (1, None)
    event = AuditEvent.objects.get(action="study.approvals_required_changed")
    assert (event.after["proposed_by"], event.after["confirmed_by"]) == ("officer1", "officer2")


def test_approvals_required_is_audited_and_at_least_one(study, ethics):
    set_approvals_required(ethics, study, 3)
    study.refresh_from_db()
    assert study.approvals_required == 3
    event = AuditEvent.objects.get(action="study.approvals_required_changed")
    assert (event.before["approvals_required"], event.after["approvals_required"]) == (2, 3)
    with pytest.raises(RegistryError, match="at least one"):
        set_approvals_required(ethics, study, 0)
