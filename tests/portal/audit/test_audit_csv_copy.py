"""On PostgreSQL the audit CSV is written by COPY (``study_log.csv_copy``); its bytes are the Python path's
(``study_log.csv_lines``, SQLite's export and the reference) exactly: header, quoting, line endings, times, the
formula guard, empty and null values, and JSON as Python writes it (keys in code point order, Python's floats),
whatever the events hold, for every filter, through the view as well."""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from portal.audit import study_log
from portal.audit.models import AuditEvent
from portal.audit.services import record

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

AWKWARD = 'say "hi", then\nbreak\r\nlines; ünïcödé ✓ 😀 \\N \\. \t'


class Odd:
    """A target that is not a model: its type is the class's name, its label its text."""

    def __str__(self) -> str:
        return AWKWARD


VALUES = [
    {"zz": 1, "b": 2, "é": 3, "ab": [1, 2, {"yy": None, "b": True}], "B": "x"},  # jsonb: by length first
    {"floats": [1.5, 0.1, 3.0, 1e-05, -1.234e-07, 1500000000000000.5, 1.7976931348623157e308, 1e16, 2.5e-300]},
    {"text": AWKWARD, "control": "\x01\x1f\x7f\u2028", "quote\"key": "back\\slash", "empty": "", "n": -12},
    {"one": 1.0}, {"v": "1.5"}, {}, [], [3, "a, \"b\""], "just text", 1.5, 1e-05, 0, -7, True, 10 ** 30,
    {"a": {"deep": {"er": [{"k2": 1, "k10": 2}]}}}, {"filters": {"action": "x"}, "upto_seq": 12},
]


def _insert(study_id, **columns) -> None:
    """An event with values ``record`` never writes (empty labels, a JSON null, a target id like a formula)."""
    row = {"actor_id": None, "actor_label": "", "action": "raw.insert", "target_type": "", "target_id": "",
           "target_label": "", "before": None, "after": None, **columns}
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO audit_auditevent (seq, created_at, actor_id, actor_label, action, study_id, target_type, "
            "target_id, target_label, before, after, prev_hash, hash, hash_version) "
            "SELECT coalesce(max(seq), 0) + 1, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, 'raw', "
            "md5(random()::text) || md5(random()::text), 2 FROM audit_auditevent",
            [row.pop("created_at", timezone.now()), row["actor_id"], row["actor_label"], row["action"], study_id,
             row["target_type"], row["target_id"], row["target_label"], row["before"], row["after"]])


@pytest.fixture
def awkward_log(make_study, make_user):
    if connection.vendor != "postgresql":
        pytest.skip("the COPY path is PostgreSQL's")
    study, other = make_study("alpha"), make_study("beta")
    coordinator = make_user("coord", study, ["coordinator"])
    for n, value in enumerate(VALUES):
        record(coordinator if n % 3 == 0 else AWKWARD, "sample.made", Odd() if n % 2 else study, before=value,
               after=VALUES[-1 - n], study=study)
    for label in ("=SUM(A1)", "+1", "-1", "@me", "\tx", "\rx", "plain, comma", '"quoted"', "", "é"):
        record(label, label or "empty.action", Odd(), after={"label": label}, study=study)
    record("someone", "sample.made", None, after={"n": 1})  # no study: in neither export
    record("someone", "sample.made", other, after={"n": 2})  # another study's
    _insert(study.pk, after="null", before='{"b": 1, "a": 0.50}', target_type="auth.user", target_id="-3")
    _insert(study.pk, actor_id=coordinator.pk, actor_label="coord", action="x" * 80, target_label="y" * 255,
            created_at=timezone.now().replace(microsecond=0))
    _insert(study.pk, before='"=formula in JSON"', after='[1.50, 100.0, 0.0001, 0.00001]', target_id="=1")
    return study, coordinator


def _both(study, **filters) -> tuple[bytes, bytes]:
    found = study_log.events(study, study_log.LogFilter(**filters))
    upto = study_log.head_seq()
    python = "".join(study_log.csv_lines(found, upto=upto)).encode()
    return b"".join(study_log.csv_copy(found, upto=upto)), python


def test_the_copy_writes_the_python_paths_bytes_exactly(awkward_log, monkeypatch):
    study, _ = awkward_log
    monkeypatch.setattr(study_log, "EXPORT_CHUNK", 4)  # several pieces of either
    copied, python = _both(study)
    assert copied == python
    assert python.count(b"\r\n") > AuditEvent.objects.filter(study_id=study.pk).count()  # a line each, and more
    for expected in (b'"say ""hi"", then\nbreak\r\nlines;', b",'=SUM(A1),", b",'-1,", b",'\tx,", b',"\'\rx",',
                     '"{""B"": ""x"", ""ab"": [1, 2, {""b"": true, ""yy"": null}], ""b"": 2, ""zz"": 1, ""é"": 3}"'
                     .encode(), b"1e-05, -1.234e-07, 1500000000000000.5, 1797693134862315",
                     b'"{""a"": 0.5, ""b"": 1}"', b"[1.5, 100.0, 0.0001, 1e-05]",
                     b"+00:00,,,raw.insert,auth.user,'-3,,"):
        assert expected in copied, expected


def test_every_filter_gives_the_same_bytes(awkward_log):
    study, _ = awkward_log
    today = timezone.localdate()
    for filters in ({"action": "sample.made"}, {"action": "sample.*"}, {"action": "+1"}, {"actor": AWKWARD},
                    {"actor": "coord"}, {"target_type": "studies.study", "target_id": str(study.pk)},
                    {"target_type": "Odd"}, {"since": today, "until": today}, {"until": today - timedelta(days=1)},
                    {"action": "it's; DROP TABLE x; --"}):
        copied, python = _both(study, **filters)
        assert copied == python, filters
        assert python.count(b"\r\n") >= 1
    assert _both(study, actor="coord")[0].count(b"\r\n") > 1
    assert _both(study, until=today - timedelta(days=1))[0] == b",".join(
        name.encode() for name in study_log.CSV_COLUMNS) + b"\r\n"  # nothing matches: the header alone


def test_the_view_streams_the_copy(client, awkward_log, monkeypatch):
    study, coordinator = awkward_log
    monkeypatch.setattr(study_log, "EXPORT_CHUNK", 5)
    client.force_login(coordinator)
    expected = _both(study)[1]
    response = client.get(reverse("audit-export", args=[study.code]))
    pieces = list(response.streaming_content)
    assert b"".join(pieces) == expected  # the export's own event comes after what it exports
    exported_rows = AuditEvent.objects.filter(study_id=study.pk).exclude(action="audit.exported").count()
    assert len(pieces) == 1 + -(-exported_rows // 5)  # the header, then a piece of 5 rows at a time
    exported = AuditEvent.objects.get(action="audit.exported")
    assert (exported.actor_label, exported.study_id, exported.after["filters"]) == ("coord", study.pk, {})


@pytest.mark.django_db(transaction=True)  # autocommit, as a request runs
def test_an_export_left_half_read_ends_its_copy_and_the_next_query_runs(client, awkward_log, monkeypatch):
    study, coordinator = awkward_log
    monkeypatch.setattr(study_log, "EXPORT_CHUNK", 2)
    client.force_login(coordinator)
    response = client.get(reverse("audit-export", args=[study.code]))
    pieces = iter(response.streaming_content)
    assert next(pieces).startswith(b"seq,") and next(pieces).count(b"\r\n") == 2
    backend = connection.connection.info.backend_pid
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.ACTIVE  # mid-COPY
    response.close()  # the client went away
    assert connection.connection is None or connection.connection.info.transaction_status == \
        psycopg.pq.TransactionStatus.IDLE
    assert AuditEvent.objects.filter(study_id=study.pk).count() > 2
    with connection.cursor() as cursor:  # the old backend stops copying (it may take the server a moment to see)
        for _ in range(50):
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state = 'active'", [backend])
            if cursor.fetchone() == (0,):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"backend {backend} is still copying")
