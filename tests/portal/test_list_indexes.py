"""Every query a list runs on the big tables (recordings, episodes, audit events) and on release requests is
served by an index: the queries are captured from real requests and explained on PostgreSQL with sequential
scans priced out, so the planner shows the index it would use at a year's size; a sequential scan of one of
these tables, or a list read through another index than the one built for it, fails."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django_scopes import scope

from portal.audit import study_log
from portal.core.pagination import Keyset
from portal.demo.seeding import seed_study
from portal.recordings.models import Recording
from portal.releases.models import ReleaseRequest
from portal.studies.models import Demonstrator

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]
BIG_TABLES = ("recordings_recording", "recordings_episode", "audit_auditevent", "releases_releaserequest")
PASSWORD = "plans-" * 3


@pytest.fixture
def seeded():
    if connection.vendor != "postgresql":
        pytest.skip("query plans are PostgreSQL's")
    report = seed_study("plans", episodes=300, headsets=20, demonstrators=30, release_requests=300,
                        password=PASSWORD)
    with connection.cursor() as cursor:
        for table in BIG_TABLES:
            cursor.execute(f"ANALYZE {table}")
    return report


def _plan_nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def _explain(sql: str) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("RESET enable_seqscan")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return list(_plan_nodes(plan[0]["Plan"]))


def _indexes_used(client, url: str) -> set[str]:
    """The indexes the big-table queries of one request use; fails on a sequential scan of a big table."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    used: set[str] = set()
    for query in captured.captured_queries:
        sql = query["sql"]
        if not sql.startswith(("SELECT", "WITH")) or not any(f'"{table}"' in sql for table in BIG_TABLES):
            continue
        for node in _explain(sql):
            scanned = node.get("Relation Name")
            assert not (node["Node Type"] == "Seq Scan" and scanned in BIG_TABLES), (url, sql)
            if "Index Name" in node:
                used.add(node["Index Name"])
    return used


def _urls(report) -> dict[str, tuple[str, set[str]]]:
    study = report.study
    with scope(study=study):
        designator = Demonstrator.objects.order_by("designator").first().designator
        newest = Recording.objects.order_by("-created_at", "-pk")[49]
        page_two = Keyset("-created_at", "-pk").encode(newest, backwards=False)
        newest_request = ReleaseRequest.objects.order_by("-number")[49]
        requests_page_two = Keyset("-number").encode(newest_request, backwards=False)
    recordings = reverse("recording-list", args=[study.code])
    episodes = reverse("episode-list", args=[study.code])
    releases = reverse("release-list", args=[study.code])
    api = f"/api/studies/{study.code}"
    return {
        "recordings": (recordings, {"recording_list"}),
        "recordings page 2": (f"{recordings}?cursor={page_two}", {"recording_list"}),
        # A rare state: for the state most recordings are in (verified), reading the list's own order and skipping
        # is as good, and the planner picks either by a hair.
        "recordings by state": (f"{recordings}?state=quarantined", {"recording_list_state"}),
        "recordings by headset": (f"{recordings}?headset=HS-0001", {"recording_list_headset"}),
        "recordings by demonstrator": (f"{recordings}?demonstrator={designator}", {"recording_list_demonstrator"}),
        "recordings by date": (f"{recordings}?recorded_from=2000-01-01", set()),
        "episodes": (episodes, {"episode_index_unique_in_study"}),
        # A rare status (most episodes are verified, where reading the list's own order and skipping is as good).
        "episodes by receipt": (f"{episodes}?receipt=pending", {"episode_list_receipt"}),
        # Its episode count covers most rows (verified): any index led by the study serves it without a heap
        # visit once the table is vacuumed, which a test's transaction cannot do; bench/portal_load.py times it.
        "dashboard": (reverse("dashboard"), {"recording_list_state"}),
        "API recordings": (f"{api}/recordings/", {"recording_list"}),
        "API recordings page 2": (f"{api}/recordings/?cursor={page_two}", {"recording_list"}),
        "API episodes": (f"{api}/episodes/", {"episode_index_unique_in_study"}),
        "API episodes by receipt": (f"{api}/episodes/?receipt_status=pending", {"episode_list_receipt"}),
        # Release requests newest first: (study, number) is the unique constraint's index, one per filter besides.
        "release requests": (releases, {"release_request_number_unique"}),
        "release requests page 2": (f"{releases}?cursor={requests_page_two}", {"release_request_number_unique"}),
        "release requests by state": (f"{releases}?state=awaiting_approval", {"releases_re_study_i_556314_idx"}),
        # Every seeded request is the coordinator's: reading the list's own order and skipping is as good.
        "release requests of the caller": (f"{releases}?mine=1", set()),
        "API release requests": (f"{api}/release-requests/", {"release_request_number_unique"}),
        "API release requests page 2": (f"{api}/release-requests/?cursor={requests_page_two}",
                                        {"release_request_number_unique"}),
        "API release requests by state": (f"{api}/release-requests/?state=awaiting_approval",
                                          {"releases_re_study_i_556314_idx"}),
    }


def test_study_lists_read_their_own_index(client, seeded):
    client.force_login(_user(seeded.logins["coordinator"]))
    problems = {}
    for name, (url, expected) in _urls(seeded).items():
        used = _indexes_used(client, url)
        if not expected <= used:
            problems[name] = f"expected {sorted(expected)}, used {sorted(used)}"
    assert not problems, problems


def test_the_admins_audit_log_reads_the_chain_and_action_indexes(client, seeded):
    client.force_login(_user(seeded.logins["admin"]))
    url = reverse("admin:audit_auditevent_changelist")
    assert "audit_auditevent_seq_key" in _indexes_used(client, f"{url}?p=3")
    assert "audit_action_seq" in _indexes_used(client, f"{url}?action=recording.quarantined")
    assert "audit_target_type_seq" in _indexes_used(client, f"{url}?target_type=recordings.episode")
    assert "recordings_recording_pkey" in _indexes_used(client, reverse("admin:recordings_recording_changelist"))


def test_a_studys_audit_log_newest_first_reads_its_index(seeded):
    """The queries an audit view of one study runs (keyset on the study and seq), first page and the pages either
    side of a cursor, read a range of (study_id, seq) in the index's order, even on this small log of mostly this
    study's events, where the whole chain's seq index would tempt the planner (tests/portal/audit/test_audit_plan.py
    shows why it must not, at 300 000 events)."""
    events = study_log.events(seeded.study).only(*study_log.LISTED)
    keyset = Keyset(*study_log.ORDER)
    middle = events[60]
    for backwards in (False, True):
        ordered = events.order_by(*keyset.order_by(backwards=backwards))
        for query in (ordered[:51], keyset.beyond(ordered, keyset.position(middle), backwards=backwards)[:51]):
            nodes = _explain(str(query.query))
            assert "audit_study_seq" in {node.get("Index Name") for node in nodes}
            assert "audit_auditevent_seq_key" not in {node.get("Index Name") for node in nodes}
            assert not any(node["Node Type"] == "Sort" for node in nodes)  # the index gives the order


def test_the_audit_view_reads_an_index_for_each_filter(client, seeded):
    """Each filter of a study's audit view, page and API, reads the index built for it (or, for an action, either
    index of actions: with one study they cost the same); the whole log, page and API, reads (study_id, seq), as
    the test above explains. What matches most of this one study's log (an action prefix, a time range from long
    ago) may read another of its indexes; it must not scan the table. The actor and action are rare ones (the
    seeding's role grants)."""
    client.force_login(_user(seeded.logins["coordinator"]))
    with scope(study=seeded.study):
        recording = Recording.objects.filter(state="verified").order_by("created_at").first()
        designator = Demonstrator.objects.order_by("designator").first().designator
    page = reverse("audit-list", args=[seeded.study.code])
    api = f"/api/studies/{seeded.study.code}/audit-events/"
    actions = {"audit_study_action_seq", "audit_action_seq"}
    cases = {  # name -> (url, indexes it must use, indexes of which it must use one)
        "audit log": (page, {"audit_study_seq"}, set()),
        "by object": (f"{page}?target_type=recordings.recording&target_id={recording.pk}", {"audit_target_seq"},
                      set()),
        "a recording's history": (f"{page}?recording={recording.uid}", {"audit_target_seq"}, set()),
        "a demonstrator's history": (f"{page}?demonstrator={designator}", {"audit_target_seq"}, set()),
        "by actor": (f"{page}?actor=seed_scale", {"audit_study_actor_seq"}, set()),
        "by action": (f"{page}?action=access.role_granted", set(), actions),
        "by action prefix": (f"{page}?action=release.*", set(), set()),
        "by time": (f"{page}?since=2000-01-01", set(), set()),
        "API": (api, {"audit_study_seq"}, set()),
        "API by action": (f"{api}?action=access.role_granted", set(), actions),
        "API a recording's history": (f"{api}?recording={recording.uid}", {"audit_target_seq"}, set()),
    }
    problems = {}
    for name, (url, required, one_of) in cases.items():
        used = _indexes_used(client, url)
        if not required <= used or (one_of and not one_of & used):
            problems[name] = f"expected {sorted(required)} and one of {sorted(one_of)}, used {sorted(used)}"
    assert not problems, problems


def _user(username: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username)


def test_date_filters_are_ranges_on_the_column(client, seeded):
    """A date filter compares the column with the day's bounds (an index range), never a cast of every row."""
    client.force_login(_user(seeded.logins["coordinator"]))
    with scope(study=seeded.study):
        newest = Recording.objects.exclude(recorded_at=None).order_by("-recorded_at").first()
    day = newest.recorded_at.date()
    url = reverse("recording-list", args=[seeded.study.code])
    with CaptureQueriesContext(connection) as captured:
        page = client.get(url, {"recorded_from": day.isoformat(), "recorded_to": day.isoformat()})
    rows_query = next(q["sql"] for q in captured.captured_queries if "recordings_recording" in q["sql"]
                      and "ORDER BY" in q["sql"])
    assert '"recorded_at" >=' in rows_query and "::date" not in rows_query
    assert page.status_code == 200 and str(newest.uid) in page.content.decode()


RESEARCH_TABLES = ("research_issuedlink", "research_accessrequest", "releases_releaseitem")


@pytest.fixture
def seeded_research():
    if connection.vendor != "postgresql":
        pytest.skip("query plans are PostgreSQL's")
    report = seed_study("plansr", episodes=200, headsets=10, demonstrators=20, released=120, links=2000,
                        access_requests=400, password=PASSWORD)
    with connection.cursor() as cursor:
        for table in RESEARCH_TABLES:
            cursor.execute(f"ANALYZE {table}")
    return report


def _research_indexes(client, url: str) -> set[str]:
    """The indexes the page's rows query (ordered, limited) reads, which must need no sort; no query of the
    request scans one of these tables sequentially."""
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    used: set[str] = set()
    for query in captured.captured_queries:
        sql = query["sql"]
        if not sql.startswith(("SELECT", "WITH")) or not any(f'"{table}"' in sql for table in RESEARCH_TABLES):
            continue
        nodes = _explain(sql)
        for node in nodes:
            assert not (node["Node Type"] == "Seq Scan" and node.get("Relation Name") in RESEARCH_TABLES), (url, sql)
        if "ORDER BY" in sql and "LIMIT 51" in sql:
            assert not any("Sort" in node["Node Type"] for node in nodes), (url, sql)  # the index gives the order
            used |= {node["Index Name"] for node in nodes if "Index Name" in node}
    return used


def test_research_lists_read_their_own_index(client, seeded_research):
    study = seeded_research.study.code
    expected = {
        (f"/studies/{study}/access/", "coordinator"): {"access_request_all"},
        # Every seeded request is waiting, and every seeded link the researcher's: reading the list's own order and
        # skipping is as good as the filter's index.
        (f"/studies/{study}/access/?state=pending", "coordinator"): set(),
        # One study in the database: the whole log's newest-first index serves its list as well as the study's.
        (f"/studies/{study}/access/links/", "coordinator"): set(),
        (f"/api/studies/{study}/links/", "coordinator"): set(),
        ("/research/links/", "researcher"): set(),
        (f"/studies/{study}/released/", "researcher"): {"release_item_browse"},
        (f"/api/studies/{study}/released-episodes/", "researcher"): {"release_item_browse"},
    }
    problems = {}
    for (url, role), indexes in expected.items():
        client.force_login(_user(seeded_research.logins[role]))
        used = _research_indexes(client, url)
        if not indexes <= used:
            problems[url] = f"expected {sorted(indexes)}, used {sorted(used)}"
    assert not problems, "\n".join(f"{url}: {problem}" for url, problem in problems.items())
