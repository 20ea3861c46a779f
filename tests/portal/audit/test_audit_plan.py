"""A study's audit view and CSV read a range of (study_id, seq) whatever came after the study's newest event.

The log is seeded as a busy portal's is: 300 000 events of the study, then 300 000 others (sign-ins, another
study's events), then one event of the study. The study holds half the log, so for ``study_id = X ORDER BY seq
DESC`` PostgreSQL would walk the whole chain's seq index backwards from its end and filter, passing all 300 000
newer events before the study's second newest (the control below shows it does, on this data). The queries the
view really sends (captured from requests) and the export's COPY query (``study_log.copy_select``, with the setting
the export runs it under) are explained with ANALYZE: each reads ``audit_study_seq`` in the direction of its page,
and no more rows than it returns.

The bulk rows are written by SQL (``INSERT ... SELECT generate_series``: inserts are what the append-only triggers
allow); their hashes are unique but do not chain, which neither the page nor the export checks (the chain's status
on the page is the last verification's, not a walk). The flush after each test removes them.
"""

from __future__ import annotations

import json
import statistics
import time

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from portal.audit import study_log
from portal.audit.models import AuditEvent
from portal.audit.services import record
from portal.core.pagination import EXACT_COUNT_UP_TO, Keyset

# Committed and emptied by the flush's TRUNCATE after each test (tests/conftest.py): rolled back instead, the 600 000
# rows would stay behind as dead rows in the table and its indexes, and the plans of the tests after it would be
# made on a bloated table until a vacuum came.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.slow]
INDEX = "audit_study_seq"
STUDY_EVENTS = OTHER_EVENTS = 300_000


def _append(count: int, study_id: int | None, action: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO audit_auditevent (seq, created_at, actor_id, actor_label, action, study_id, target_type, "
            "target_id, target_label, before, after, prev_hash, hash, hash_version) "
            "SELECT head.seq + n, now(), NULL, 'seeded', %s, %s, 'auth.user', '1', 'seeded', NULL, "
            "'{\"n\": 1}'::jsonb, 'seeded', md5('seeded' || (head.seq + n)) || md5('hash' || (head.seq + n)), 2 "
            "FROM (SELECT coalesce(max(seq), 0) AS seq FROM audit_auditevent) AS head, generate_series(1, %s) AS n",
            [action, study_id, count])


@pytest.fixture
def busy_log(make_study, make_user):
    if connection.vendor != "postgresql":
        pytest.skip("query plans are PostgreSQL's")
    study, other = make_study("alpha"), make_study("beta")
    coordinator = make_user("coord", study, ["coordinator"])
    _append(STUDY_EVENTS, study.pk, "sample.made")
    _append(OTHER_EVENTS // 2, None, "accounts.login")
    _append(OTHER_EVENTS // 2, other.pk, "sample.made")
    newest = record("ada", "sample.checked", study)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE audit_auditevent")
    return study, coordinator, newest


def _explain(sql: str) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    return list(nodes(plan[0]["Plan"]))


def _log_queries(captured) -> list[str]:
    """The queries of a request that read rows of the audit log in an order (pages and chunks, not counts)."""
    return [query["sql"] for query in captured.captured_queries
            if query["sql"].startswith("SELECT") and '"audit_auditevent"' in query["sql"] and "ORDER BY" in query["sql"]
            and "LIMIT 1" not in query["sql"]]


def _assert_a_range_of_the_index(sql: str, *, direction: str, rows: int) -> None:
    nodes = _explain(sql)
    scans = [node for node in nodes if node.get("Relation Name") == "audit_auditevent"]
    assert scans and all(node["Node Type"] in ("Index Scan", "Index Only Scan") for node in scans), (sql, nodes)
    assert {node["Index Name"] for node in scans} == {INDEX}, (sql, nodes)
    assert {node["Scan Direction"] for node in scans} == {direction}, (sql, nodes)
    assert not any(node["Node Type"] in ("Seq Scan", "Sort") for node in nodes), (sql, nodes)
    for node in scans:  # read no more than it returns: no walk past the other studies' events
        assert node["Actual Rows"] <= rows + 1 and node.get("Rows Removed by Filter", 0) == 0, (sql, node)


def test_the_first_page_and_the_pages_either_side_read_a_range_of_the_studys_index(client, busy_log):
    study, coordinator, newest = busy_log
    # The control: on this log the plain equality query walks the chain's seq index past the 300 000 newer events
    # (what the first page did before it named the study as a range).
    plain = AuditEvent.objects.filter(study_id=study.pk).order_by("-seq")[:51]
    assert sum(node.get("Rows Removed by Filter", 0) for node in _explain(str(plain.query))) >= OTHER_EVENTS

    client.force_login(coordinator)
    url = reverse("audit-list", args=[study.code])
    with CaptureQueriesContext(connection) as captured:
        page = client.get(url)
    assert page.status_code == 200 and f'<tr data-seq="{newest.seq}">' in page.content.decode()
    [first] = _log_queries(captured)
    _assert_a_range_of_the_index(first, direction="Backward", rows=51)
    # "Showing 50 of about N": its bounded count reads the same range on (its first 10 001 entries), not the table.
    [count] = [query["sql"] for query in captured.captured_queries if query["sql"].startswith("SELECT COUNT(*)")
               and '"audit_auditevent"' in query["sql"]]
    _assert_a_range_of_the_index(count, direction="Backward", rows=EXACT_COUNT_UP_TO + 1)

    keyset = Keyset(*study_log.ORDER)
    middle = AuditEvent.objects.filter(study_id=study.pk).order_by("-seq")[1000]
    for backwards, direction in ((False, "Backward"), (True, "Forward")):
        cursor = keyset.encode(middle, backwards=backwards)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url, {"cursor": cursor}).status_code == 200
        [query] = _log_queries(captured)
        _assert_a_range_of_the_index(query, direction=direction, rows=51)

    timings = []
    with connection.cursor() as cursor:
        for _ in range(30):
            started = time.perf_counter()
            cursor.execute(first)
            cursor.fetchall()
            timings.append(time.perf_counter() - started)
    print(f"first page query, warm, 30 runs: median {statistics.median(timings) * 1000:.2f} ms, "
          f"max {max(timings) * 1000:.2f} ms")


def test_the_csvs_copy_reads_the_studys_index_once_backwards(client, busy_log):
    study, coordinator, newest = busy_log
    client.force_login(coordinator)
    response = client.get(reverse("audit-export", args=[study.code]))
    pieces = iter(response.streaming_content)
    header, first, second = next(pieces), next(pieces), next(pieces)
    assert header.startswith(b"seq,") and first.split(b",", 1)[0] == str(newest.seq).encode()
    assert first.count(b"\r\n") == second.count(b"\r\n") == study_log.EXPORT_CHUNK
    response.close()  # left half read: the export closes its connection (study_log._copied)
    connection.ensure_connection()
    # The query COPY writes out (study_log.copy_select), its values bound as psycopg binds them for COPY.
    upto = newest.seq
    select, params = study_log.copy_select(study_log.events(study), upto=upto)
    query = psycopg.ClientCursor(connection.connection).mogrify(select, params)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(study_log.COPY_PLAN)  # as the export runs it
        _assert_a_range_of_the_index(query, direction="Backward",
                                     rows=AuditEvent.objects.filter(study_id=study.pk, seq__lte=upto).count())
