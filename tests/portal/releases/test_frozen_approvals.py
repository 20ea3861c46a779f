"""The requester cannot lower the bar for their own request: the number of approvals is frozen on the request
when it is submitted, and only the study's ethics officers change the study's number (below 2 only with a second
officer's confirmation: ``tests/portal/studies/test_approval_policy.py``)."""

from __future__ import annotations

import pytest
from django_scopes import scope

from portal.releases.models import ReleaseRequest
from portal.releases.services.approval import approve
from portal.studies.services.approval_policy import confirm_approvals_required, set_approvals_required

pytestmark = pytest.mark.django_db
State = ReleaseRequest.State


def state(request: ReleaseRequest) -> str:
    with scope(study=request.study):
        return ReleaseRequest.objects.get(pk=request.pk).state


def test_the_requester_cannot_lower_the_approvals_of_their_own_request(team, verified, make_request, client):
    request = make_request(verified(1))
    client.force_login(team.reg.coordinator)
    response = client.post(f"/studies/{team.study.code}/settings/approvals/", {"approvals_required": "1"})
    assert response.status_code == 403
    team.study.refresh_from_db()
    assert team.study.approvals_required == 2

    with scope(study=team.study):
        approve(team.reg.ethics, request, manifest_sha256=request.manifest_sha256)
    assert state(request) == State.AWAITING_APPROVAL


def test_a_request_keeps_the_number_it_was_submitted_under(team, verified, make_request, client):
    """Even the officers lowering the study's number after submission leaves the request needing two; a request
    submitted after the change needs one."""
    before, after = verified(2)
    submitted = make_request([before])
    set_approvals_required(team.reg.ethics, team.study, 1)
    confirm_approvals_required(team.ethics2, team.study, 1)
    team.study.refresh_from_db()
    assert team.study.approvals_required == 1
    later = make_request([after])
    assert (submitted.approvals_required, later.approvals_required) == (2, 1)

    with scope(study=team.study):
        approve(team.reg.ethics, submitted, manifest_sha256=submitted.manifest_sha256)
        approve(team.reg.ethics, later, manifest_sha256=later.manifest_sha256)
    assert (state(submitted), state(later)) == (State.AWAITING_APPROVAL, State.APPROVED)
    client.force_login(team.reg.ethics)
    detail = client.get(f"/api/studies/{team.study.code}/release-requests/{submitted.number}/").json()
    assert (detail["approvals_required"], len(detail["approvals"])) == (2, 1)

    with scope(study=team.study):
        approve(team.ethics2, submitted, manifest_sha256=submitted.manifest_sha256)
    assert state(submitted) == State.APPROVED
