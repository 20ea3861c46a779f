"""Every list costs the same number of SQL queries for a page of 5 rows and for a full page of 50: no query per
row. The pages' and the API's numbers are pinned; the admin's changelists of the study tables are held equal."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import resolve, reverse
from django_scopes import scope

from portal.core.seeding import seed_study
from portal.studies.models import Demonstrator

pytestmark = pytest.mark.django_db
PASSWORD = "rows-" * 4  # seeded users sign in with force_login: no password check needed here

# (URL name, query string, queries for one request). The fixed part of every study page: session, user,
# second-factor device, study, the caller's roles, and the navigation's grants.
PAGES = [
    ("dashboard", "", 11),  # + the coordinator's release requests by state (one grouped count)
    ("study-overview", "", 13),
    ("recording-list", "", 8),
    ("recording-list", "?state=verified", 8),
    ("recording-list", "?headset={headset}", 8),
    ("recording-list", "?demonstrator={designator}", 8),
    ("recording-list", "?recorded_from=2000-01-01&recorded_to=2999-12-31", 8),
    ("episode-list", "", 10),
    ("episode-list", "?receipt=verified", 10),
    ("study-headsets", "", 8),
    ("study-demonstrators", "", 9),
    ("study-suggest-headsets", "?q=HS", 6),
    ("study-suggest-demonstrators", "?q=a", 6),
]
API = [
    ("api-recording-list", "?state=verified", 8),
    ("api-recording-list", "", 8),
    ("api-episode-list", "", 8),
    ("api-headset-list", "", 8),
    ("api-demonstrator-list", "", 8),
    ("api-consent-event-list", "", 8),
    ("api-consent-document-list", "", 8),
]


@pytest.fixture
def studies():
    """A study whose lists show 5 rows, and one whose lists show a full first page of 50."""
    small = seed_study("rows5", episodes=5, headsets=5, demonstrators=5, password=PASSWORD)
    large = seed_study("rows50", episodes=60, headsets=55, demonstrators=55, password=PASSWORD)
    return small, large


def _queries(client, url: str) -> tuple[int, bytes]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, headers={"accept": "application/json" if "/api/" in url else "text/html"})
    assert response.status_code == 200, (url, response.status_code)
    return len(captured.captured_queries), response.content


def _url(name: str, query: str, report, api: bool = False) -> str:
    study = report.study
    with scope(study=study):
        designator = Demonstrator.objects.order_by("designator").first().designator
    path = reverse(name) if name == "dashboard" else reverse(name, kwargs={"study_code": study.code})
    return path + query.format(headset="HS-0001", designator=designator)


def _sign_in(client, report, role: str = "coordinator") -> None:
    client.force_login(_user(report.logins[role]))


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
    for name in ("recording-list", "episode-list", "study-headsets", "study-demonstrators"):
        page = client.get(_url(name, "", large)).content.decode()
        assert page.count("<tr") == 51, name  # the heading and 50 rows
        assert "Showing 50 of " in page and 'rel="next"' in page
        links = re.findall(r'href="(/studies/rows50/recordings/[0-9a-f-]{36}/)"', page)
        assert name not in ("recording-list", "episode-list") or len(links) == 50
        assert all(resolve(link).url_name == "recording-detail" for link in links)
    for name in ("api-recording-list", "api-episode-list", "api-headset-list", "api-demonstrator-list"):
        listed = client.get(_url(name, "", large)).json()
        assert len(listed["results"]) == 50 and listed["next"], name


STUDY_TABLES = ["audit.auditevent", "recordings.recording", "recordings.episode", "recordings.verification",
                "recordings.alert", "studies.headset", "studies.demonstrator", "studies.consentevent",
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
