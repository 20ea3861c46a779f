"""Four eyes: the requester never approves (page, API, admin action, command), one officer counts once, an
officer of another study is refused, officers approving at the same instant are counted once each; the fresh
second factor. Rejection: test_release_requests.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from django_otp.oath import totp
from django_scopes import scope, scopes_disabled

from portal.accounts.services import provision_second_factor
from portal.audit.models import AuditEvent
from portal.celery import app
from portal.releases.exceptions import ApprovalRefused, ReleaseError, SecondFactorNeeded
from portal.releases.models import ReleaseRequest
from portal.releases.services.approval import SecondFactor, approve
from portal.studies.services.study import set_approval_second_factor

State = ReleaseRequest.State


def load(request: ReleaseRequest) -> ReleaseRequest:
    with scope(study=request.study):
        return ReleaseRequest.objects.get(pk=request.pk)


def approvals(request: ReleaseRequest) -> list[str]:
    with scope(study=request.study):
        return sorted(request.approvals.values_list("officer__username", flat=True))


@pytest.mark.django_db
def test_the_requester_cannot_approve_through_any_path(team, verified, make_request, client):
    both = team.both
    both.is_staff = both.is_superuser = True
    both.save()
    request = make_request(verified(1), by=both)
    digest = request.manifest_sha256
    code = team.study.code
    client.force_login(both)

    page = client.post(reverse("release-approve", args=[code, request.number]), {"manifest_sha256": digest})
    assert page.status_code == 302
    assert any("another ethics officer must approve it (four eyes)" in str(m) for m in get_messages(page.wsgi_request))

    api = client.post(f"/api/studies/{code}/release-requests/{request.number}/approve/", {"manifest_sha256": digest},
                      content_type="application/json")
    assert api.status_code == 403 and "four eyes" in api.json()["detail"]

    admin = client.post(reverse("admin:releases_releaserequest_changelist"),
                        {"action": "approve", "_selected_action": [request.pk]}, follow=True)
    assert "another ethics officer must approve it (four eyes)" in admin.content.decode()

    with pytest.raises(CommandError, match="four eyes"):
        call_command("approve_release", code, str(request.number), user=both.username, manifest_sha256=digest)

    assert approvals(request) == [] and load(request).state == State.AWAITING_APPROVAL
    assert not AuditEvent.objects.filter(action="release.approval_given").exists()


@pytest.mark.django_db
def test_one_officer_approving_twice_counts_once(team, verified, make_request):
    request = make_request(verified(1))
    with scope(study=team.study):
        approve(team.reg.ethics, request, manifest_sha256=request.manifest_sha256)
        with pytest.raises(ReleaseError, match=r"already, at .*; one officer's approval counts once"):
            approve(team.reg.ethics, request, manifest_sha256=request.manifest_sha256)
    assert approvals(request) == [team.reg.ethics.username]
    assert load(request).state == State.AWAITING_APPROVAL  # the study needs two


@pytest.mark.django_db
def test_an_officer_of_another_study_is_refused(team, verified, make_request, make_user, make_study, client):
    request = make_request(verified(1))
    other = make_user("elsewhere", make_study(f"{team.study.code}-x"), ["ethics_officer"])
    with scope(study=team.study), pytest.raises(ApprovalRefused, match=f"only an ethics officer of study "
                                                                      f"{team.study.code}"):
        approve(other, request, manifest_sha256=request.manifest_sha256)
    client.force_login(other)
    url = f"/api/studies/{team.study.code}/release-requests/{request.number}/approve/"
    assert client.post(url, {"manifest_sha256": request.manifest_sha256}).status_code == 403
    assert approvals(request) == []


@pytest.mark.django_db
def test_distinct_officers_reach_the_count_and_the_release_is_queued_once(
        team, verified, make_request, sent_tasks, django_capture_on_commit_callbacks):
    request = make_request(verified(1))
    with scope(study=team.study), django_capture_on_commit_callbacks(execute=True):
        approve(team.reg.ethics, request, manifest_sha256=request.manifest_sha256)
        assert ("releases.publish_release", (request.pk,)) not in sent_tasks
        approve(team.ethics2, request, manifest_sha256=request.manifest_sha256)
        with pytest.raises(ReleaseError, match="is approved, not awaiting approval"):
            approve(team.both, request, manifest_sha256=request.manifest_sha256)
    assert load(request).state == State.APPROVED
    assert sent_tasks.count(("releases.publish_release", (request.pk,))) == 1
    event = AuditEvent.objects.get(action="release.approved")
    assert sorted(event.after["approved_by"]) == sorted([team.reg.ethics.username, team.ethics2.username])


@pytest.mark.django_db
def test_approving_needs_the_manifest_that_was_shown(team, verified, make_request):
    request = make_request(verified(1))
    with scope(study=team.study), pytest.raises(ReleaseError, match="reload the request and review it again"):
        approve(team.reg.ethics, request, manifest_sha256="0" * 64)
    assert approvals(request) == []


@pytest.mark.django_db
def test_a_fresh_second_factor_when_the_study_asks_for_it(team, verified, make_request, settings):
    set_approval_second_factor(team.reg.coordinator, team.study, True)
    request = make_request(verified(1))
    digest = request.manifest_sha256
    officer = team.reg.ethics
    with scope(study=team.study):
        with pytest.raises(SecondFactorNeeded, match="set one up on your account page first"):
            approve(officer, request, manifest_sha256=digest)
        device = provision_second_factor("test", officer)
        stale = timezone.now() - timedelta(minutes=settings.CERES_APPROVAL_SECOND_FACTOR_MINUTES + 1)
        with pytest.raises(SecondFactorNeeded, match="passed within the last 10 minutes"):
            approve(officer, request, manifest_sha256=digest, second_factor=SecondFactor(passed_at=stale))
        approve(officer, request, manifest_sha256=digest,
                second_factor=SecondFactor(code=f"{totp(device.bin_key):06d}"))
        provision_second_factor("test", team.ethics2)
        with pytest.raises(SecondFactorNeeded, match="second factor refused: wrong or expired code"):
            approve(team.ethics2, request, manifest_sha256=digest, second_factor=SecondFactor(code="000000"))
        approve(team.ethics2, request, manifest_sha256=digest,
                second_factor=SecondFactor(passed_at=timezone.now() - timedelta(minutes=2)))
    assert load(request).state == State.APPROVED
    how = [event.after["second_factor"] for event in AuditEvent.objects.filter(action="release.approval_given")]
    assert how == ["code", "fresh"]


@pytest.mark.django_db
def test_nothing_is_approved_by_time_alone(team, verified, make_request):
    request = make_request(verified(1))
    with scope(study=team.study):
        ReleaseRequest.objects.filter(pk=request.pk).update(submitted_at=timezone.now() - timedelta(days=365))
    assert not [name for name in app.conf.beat_schedule.values() if name["task"].startswith("releases.")]
    assert load(request).state == State.AWAITING_APPROVAL


def test_the_requests_awaiting_an_officer_send_the_scoped_orms_sql_and_read_anew(team, verified, make_request):
    """``awaiting_officer_pks`` (the release requests list's marks) runs the scoped ORM query of
    ``awaiting_officer``, compiled once per process: the same SQL, and what it reads changes with every approval."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from portal.releases.services import approval

    mine = make_request(verified(1), by=team.both)  # the officer's own request never waits for them
    theirs, other = make_request(verified(1)), make_request(verified(1))

    def sent(read):
        with CaptureQueriesContext(connection) as captured:
            rows = read()
        return [query["sql"] for query in captured.captured_queries], rows

    with scope(study=team.study):
        for officer in (team.both, team.ethics2):
            compiled = sent(lambda officer=officer: approval.awaiting_officer_pks(officer))
            orm = sent(lambda officer=officer: set(approval.awaiting_officer(officer).values_list("pk", flat=True)))
            assert compiled == orm
        assert approval.awaiting_officer_pks(team.both) == {theirs.pk, other.pk}
        assert approval.awaiting_officer_pks(team.ethics2) == {mine.pk, theirs.pk, other.pk}
        approve(team.both, load(theirs), manifest_sha256=theirs.manifest_sha256)
        assert approval.awaiting_officer_pks(team.both) == {other.pk}
    with scopes_disabled():  # outside one study's scope: the ORM's query
        assert approval.awaiting_officer_pks(team.both) == {other.pk}
