"""Every list costs the same number of SQL queries for a page of 5 rows and for a full page of 50: no query per
row. The pages' and the API's numbers are pinned; the admin's changelists of the study tables are held equal."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import resolve, reverse
from django.utils import timezone
from django_scopes import scope

from portal.demo.seeding import seed_study
from portal.fixity.models import Alert, FixityProblem, FixityRun, FixityRunStudy
from portal.recordings.models import Recording
from portal.releases.models import Approval, ReleaseRequest
from portal.studies.models import Demonstrator

pytestmark = pytest.mark.django_db
PASSWORD = "rows-" * 4  # seeded users sign in with force_login: no password check needed here

# (URL name, query string, queries for one request). The fixed part of every study page: session, user,
# second-factor device, and the navigation's grants (which give the study and the caller's roles in it too, and
# the inbox badge's unread count).
PAGES = [
    # + the coordinator's release requests by state (one grouped count), access requests waiting, the study's
    # withdrawals (one query, their reach read from it)
    ("dashboard", "", 13),
    ("study-overview", "", 6),  # + the current agreement, the registry's six counts (one query)
    ("recording-list", "", 6),
    ("recording-list", "?state=verified", 6),
    ("recording-list", "?headset={headset}", 6),
    ("recording-list", "?demonstrator={designator}", 6),
    ("recording-list", "?recorded_from=2000-01-01&recorded_to=2999-12-31", 6),
    ("episode-list", "", 7),
    ("episode-list", "?receipt=verified", 7),
    ("study-headsets", "", 6),
    ("study-demonstrators", "", 7),
    ("study-suggest-headsets", "?q=HS", 5),
    ("study-suggest-demonstrators", "?q=a", 5),
    ("release-list", "", 7),  # + the requests by state for the tabs (one grouped count)
    ("release-list", "?state=awaiting_approval", 7),
    ("release-list", "?mine=1", 7),
    ("audit-list", "", 8),  # + the chain's newest verification and checkpoint
    ("audit-list", "?action=headset.registered", 8),
    ("audit-list", "?action=headset.*", 8),
    ("audit-list", "?actor={ethics}", 8),
    ("audit-list", "?target_type=studies.headset", 8),
    ("audit-list", "?since=2000-01-01&until=2999-12-31", 8),
    ("audit-list", "?demonstrator={designator}", 10),  # + the demonstrator and its consent events' ids
    ("audit-list", "?recording={recording}", 11),  # + the recording, its episode and its release requests' ids
    ("alert-list", "", 6),
    ("alert-list", "?state=open", 6),
    ("alert-detail", "", 7),  # the alert's problems; + the alert with its run, shard and the people who acted
    ("fixity-runs", "", 6),
    ("fixity-run", "", 7),  # the run's problems in the study; + the study's share of the run
]
API = [
    ("api-recording-list", "?state=verified", 8),
    ("api-recording-list", "", 8),
    ("api-episode-list", "", 8),
    ("api-headset-list", "", 8),
    ("api-demonstrator-list", "", 8),
    ("api-consent-event-list", "", 8),
    ("api-consent-document-list", "", 8),
    ("api-release-request-list", "", 8),
    ("api-release-request-list", "?state=awaiting_approval", 8),
    ("api-release-request-list", "?mine=1", 8),
    ("api-audit-event-list", "", 8),
    ("api-audit-event-list", "?action=headset.registered", 8),
    ("api-audit-event-list", "?recording={recording}", 11),
    ("api-alert-list", "", 8),
    ("api-alert-list", "?state=unresolved", 8),
]


@pytest.fixture
def studies():
    """A study whose lists show 5 rows, and one whose lists show a full first page of 50."""
    small = seed_study("rows5", episodes=5, headsets=5, demonstrators=5, release_requests=5, released=2, links=5,
                       access_requests=5, password=PASSWORD)
    large = seed_study("rows50", episodes=60, headsets=55, demonstrators=55, release_requests=55, released=40,
                       links=55, access_requests=55, password=PASSWORD)
    _seed_fixity(small.study, 5)
    _seed_fixity(large.study, 55)
    return small, large


def _seed_fixity(study, count: int) -> None:
    """``count`` fixity runs of the study, each with an alert; the first run and its alert with ``count`` problems."""
    now = timezone.now()
    runs = FixityRun.objects.bulk_create([FixityRun(kind=FixityRun.Kind.SLICE, slice_index=number % 168,
                                                    slice_count=168, requested_by="schedule", finished_at=now)
                                          for number in range(count)])
    with scope(study=study):
        FixityRunStudy.objects.bulk_create([FixityRunStudy(study=study, run=run, objects_listed=9, objects_checked=9,
                                                           bytes_checked=9000, problem_count=1) for run in runs])
        alerts = Alert.objects.bulk_create([Alert(study=study, kind=Alert.Kind.FIXITY, run=run,
                                                  message=f"fixity run {run.pk} found 1 orphan") for run in runs])
        FixityProblem.objects.bulk_create([FixityProblem(
            run=runs[0], study=study, kind=FixityProblem.Kind.ORPHAN, storage="shards",
            object_name=f"{study.code}/stray-{number}.bin", detail="no record accounts for it", alert=alerts[0])
            for number in range(count)])


def _queries(client, url: str) -> tuple[int, bytes]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, headers={"accept": "application/json" if "/api/" in url else "text/html"})
    assert response.status_code == 200, (url, response.status_code)
    return len(captured.captured_queries), response.content


def _url(name: str, query: str, report, api: bool = False) -> str:
    study = report.study
    with scope(study=study):
        designator = Demonstrator.objects.order_by("designator").first().designator
        recording = Recording.objects.filter(state="verified").order_by("created_at").first().uid
        first = {"fixity-run": {"run_id": FixityRunStudy.objects.order_by("run_id").values_list("run_id")[0][0]},
                 "alert-detail": {"pk": Alert.objects.order_by("pk").values_list("pk")[0][0]}}.get(name, {})
    site = name in ("dashboard", "research-home", "research-links")
    path = reverse(name) if site else reverse(name, kwargs={"study_code": study.code, **first})
    return path + query.format(headset="HS-0001", designator=designator, ethics=report.logins["ethics"],
                               recording=recording)


def _sign_in(client, report, role: str = "coordinator") -> None:
    client.force_login(_user(report.logins[role]))


# Researcher access: the stewards' lists (as the coordinator) and the researcher's own (the researcher). Each page's
# inbox badge is read from the navigation's query (the API shows none).
RESEARCH = [
    ("research-access-requests", "", "coordinator", 6),
    ("research-access-requests", "?state=pending", "coordinator", 6),
    ("research-study-links", "", "coordinator", 6),
    ("research-withdrawals", "", "coordinator", 6),
    ("api-access-request-list", "", "coordinator", 8),
    ("api-issued-link-list", "", "coordinator", 8),
    # The catalogue first reads which superseded releases still serve episodes (none here; a handful while a
    # withdrawal's release is on its way), once for the filters' menus and the rows.
    ("research-browse", "", "researcher", 12),  # + the filters' tasks and outcomes (one query) and releases
    ("research-browse", "?release=1", "researcher", 10),
    ("research-links", "", "researcher", 6),
    ("api-released-list", "", "researcher", 8),
    ("api-released-episode-list", "", "researcher", 12),
    ("api-issued-link-list", "", "researcher", 8),
]


@pytest.mark.parametrize(("name", "query", "role", "expected"), RESEARCH,
                         ids=[f"{n}{q}-{r}" for n, q, r, _ in RESEARCH])
def test_a_research_list_costs_the_same_queries_for_5_rows_and_for_50(client, studies, name, query, role, expected):
    small, large = studies
    counts = {}
    for report in studies:
        client.logout()
        _sign_in(client, report, role)
        url = _url(name, query, report)
        _queries(client, url)
        counts[report.study.code], _ = _queries(client, url)
    assert counts == {small.study.code: expected, large.study.code: expected}


def test_the_large_research_lists_really_show_a_full_page(client, studies):
    _, large = studies
    _sign_in(client, large, "researcher")
    page = client.get(_url("research-browse", "", large)).content.decode()
    assert page.count('name="items"') == 50 and 'rel="next"' in page
    assert client.get(_url("research-links", "", large)).content.decode().count('<td class="ident">rows50</td>') == 50
    _sign_in(client, large)
    page = client.get(_url("research-access-requests", "?state=pending", large)).content.decode()
    assert page.count('data-state="pending"') == 50 and 'rel="next"' in page


@pytest.mark.parametrize(("name", "query", "expected"), PAGES + API, ids=[f"{n}{q}" for n, q, _ in PAGES + API])
def test_a_list_costs_the_same_queries_for_5_rows_and_for_50(client, studies, name, query, expected):
    small, large = studies
    counts = {}
    for report in studies:
        client.logout()
        _sign_in(client, report)
        url = _url(name, query, report)
        _queries(client, url)  # the first request of a session loads what is cached afterwards
        counts[report.study.code], _ = _queries(client, url)
    assert counts == {small.study.code: expected, large.study.code: expected}


def test_the_large_lists_really_show_a_full_page(client, studies):
    _, large = studies
    _sign_in(client, large)
    for name in ("recording-list", "episode-list", "study-headsets", "study-demonstrators", "release-list",
                 "audit-list", "alert-list", "fixity-runs", "fixity-run", "alert-detail"):
        page = client.get(_url(name, "", large)).content.decode()
        # The heading and 50 rows (an alert's and a run's page have a table of facts above their list).
        assert page.count("<tr") - (page.split('id="problems"')[0].count("<tr") if 'id="problems"' in page else 0) \
            == 51, name
        assert "Showing 50 of " in page and 'rel="next"' in page
        links = re.findall(r'href="(/studies/rows50/recordings/[0-9a-f-]{36}/)"', page)
        assert name not in ("recording-list", "episode-list") or len(links) == 50
        assert all(resolve(link).url_name == "recording-detail" for link in links)
    page = client.get(_url("release-list", "", large)).content.decode()
    with scope(study=large.study):  # the newest 50 requests: released ones (2 of 2), and some with one approval
        newest = list(ReleaseRequest.objects.order_by("-number").values_list("pk", flat=True)[:50])
        approvals = Counter(Approval.objects.filter(request__in=newest).values_list("request", flat=True))
    shown = {given: page.count(f"<td>{given} of 2</td>") for given in (0, 1, 2)}
    assert shown[1] and shown[2] and shown == {given: sum(1 for pk in newest if approvals[pk] == given)
                                               for given in (0, 1, 2)}
    for name in ("api-recording-list", "api-episode-list", "api-headset-list", "api-demonstrator-list",
                 "api-release-request-list", "api-audit-event-list", "api-alert-list"):
        listed = client.get(_url(name, "", large)).json()
        assert len(listed["results"]) == 50 and listed["next"], name


STUDY_TABLES = ["audit.auditevent", "recordings.recording", "recordings.episode", "recordings.verification",
                "fixity.alert", "studies.headset", "studies.demonstrator", "studies.consentevent",
                "studies.consentdocument", "access.rolegrant"]


def test_the_admins_lists_of_study_tables_cost_no_query_per_row(client, studies):
    registered = {f"{m._meta.app_label}.{m._meta.model_name}": m for m in admin.site._registry}
    assert set(STUDY_TABLES) <= set(registered)
    client.force_login(_user(studies[1].logins["admin"]))
    mismatched = {}
    for label in STUDY_TABLES:
        model = registered[label]
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        counts = []
        for report in studies:
            field = "study_id" if label == "audit.auditevent" else "study__id__exact"
            client.get(f"{url}?{field}={report.study.pk}")
            counts.append(_queries(client, f"{url}?{field}={report.study.pk}")[0])
        if counts[0] != counts[1]:
            mismatched[label] = counts
    assert not mismatched, f"queries for 5 rows and for 50 differ: {mismatched}"


def test_the_whole_audit_log_pages_by_seq(client, studies):
    client.force_login(_user(studies[1].logins["admin"]))
    url = reverse("admin:audit_auditevent_changelist")
    client.get(url)
    first, _ = _queries(client, url)
    deep, content = _queries(client, f"{url}?p=3")
    assert first == deep == 8
    from portal.audit.models import AuditEvent

    last = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first()
    shown = [int(n) for n in re.findall(rb'class="field-seq"><a [^>]*>(\d+)</a>', content)]
    assert shown == list(range(last - 100, last - 150, -1))  # page 3 of 50 a page, newest first


def _user(username: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)
