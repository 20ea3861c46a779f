"""Release requests (services/release_requests.py): a rejection needs a reason and ends the request, which no move
brings back."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.releases.exceptions import IllegalTransition, ReleaseError
from portal.releases.models import ReleaseRequest
from portal.releases.services import release_requests
from portal.releases.services.approval import approve

State = ReleaseRequest.State


def load(request: ReleaseRequest) -> ReleaseRequest:
    with scope(study=request.study):
        return ReleaseRequest.objects.get(pk=request.pk)


@pytest.mark.django_db
def test_rejection_needs_a_reason_and_ends_the_request(team, verified, make_request, client):
    request = make_request(verified(1))
    with scope(study=team.study):
        with pytest.raises(ReleaseError, match="a rejection needs a reason"):
            release_requests.reject(team.reg.ethics, request, reason="  ")
        release_requests.reject(team.reg.ethics, request, reason="consent wording under review")
        with pytest.raises(ReleaseError, match="is rejected, not awaiting approval"):
            approve(team.ethics2, request, manifest_sha256=request.manifest_sha256)
    rejected = load(request)
    assert (rejected.state, rejected.reason, rejected.rejected_by) == (
        State.REJECTED, "consent wording under review", team.reg.ethics)
    events = AuditEvent.objects.count()
    with scope(study=team.study), pytest.raises(IllegalTransition,
                                                match=r"release-\d{4} is rejected; it cannot become awaiting approval"):
        release_requests.set_state(team.reg.coordinator, rejected, State.AWAITING_APPROVAL, action="release.submitted")
    assert load(request).state == State.REJECTED and AuditEvent.objects.count() == events
    client.force_login(team.reg.coordinator)
    page = client.get(reverse("release-detail", args=[team.study.code, request.number]))
    assert "consent wording under review" in page.content.decode()
