"""Drill: two ethics officers approving the same request at the same instant, 50 times over (PostgreSQL, each in
its own connection, released together by a barrier): every time exactly two approvals, one move to approved, one
release queued."""

from __future__ import annotations

import pytest
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.releases.models import ReleaseRequest
from portal.releases.services.approval import approve
from tests.portal.concurrency import needs_postgres, run_at_once

pytestmark = [*needs_postgres, pytest.mark.slow]
TIMES = 50


def test_two_officers_at_the_same_instant_fifty_times(team, verified, make_request, sent_tasks):
    episode = verified(1)[0]
    officers = (team.reg.ethics, team.ethics2)
    for _ in range(TIMES):
        request = make_request([episode])
        digest = request.manifest_sha256
        outcomes = run_at_once(team.study, [lambda o=o, r=request, d=digest: approve(o, r, manifest_sha256=d)
                                            for o in officers])
        assert all(outcome is not None for outcome in outcomes)
        with scope(study=team.study):
            assert request.approvals.count() == 2
            assert ReleaseRequest.objects.get(pk=request.pk).state == ReleaseRequest.State.APPROVED
        label, target = "releases.releaserequest", str(request.pk)
        assert AuditEvent.objects.filter(action="release.approved", target_type=label, target_id=target).count() == 1
        assert AuditEvent.objects.filter(action="release.approval_given", target_type=label,
                                         target_id=target).count() == 2
        assert sent_tasks.count(("releases.publish_release", (request.pk,))) == 1
