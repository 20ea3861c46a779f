"""Ethics officers approving one request at the same instant on PostgreSQL: exactly the required count, once."""

from __future__ import annotations

from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.releases.exceptions import ReleaseError
from portal.releases.models import ReleaseRequest
from portal.releases.services.approval import approve
from tests.portal.concurrency import needs_postgres, run_at_once

pytestmark = needs_postgres


def test_officers_approving_at_the_same_instant_give_the_required_count_once(team, verified, make_request,
                                                                             sent_tasks):
    request = make_request(verified(1))
    digest = request.manifest_sha256
    officers = [team.reg.ethics, team.ethics2, team.both]  # the study needs two
    outcomes = run_at_once(team.study, [lambda o=o: approve(o, request, manifest_sha256=digest) for o in officers],
                           expected=(ReleaseError,))
    refused = [outcome for outcome in outcomes if isinstance(outcome, ReleaseError)]
    assert len(refused) == 1 and "is approved, not awaiting approval" in str(refused[0])
    with scope(study=team.study):
        assert request.approvals.count() == 2
        assert ReleaseRequest.objects.get(pk=request.pk).state == ReleaseRequest.State.APPROVED
    assert AuditEvent.objects.filter(action="release.approved").count() == 1
    assert sent_tasks.count(("releases.publish_release", (request.pk,))) == 1
