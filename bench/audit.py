"""A study's audit view and CSV export when the study's newest event follows a long run of other events.

Seeds (once, through the audit service's own bulk path, so the chain stays whole) a study with ``--events``
events, then ``--after`` other events (sign-ins, another study's events), then one more event of the study; then
measures, in this process with Django's test client (the whole middleware, view and template; no network):

- the audit view's first page: p50 / p99 / max over ``--requests`` requests warm (one connection), and "cold"
  (a new database connection for every request: the backend's catalog and plan caches empty; PostgreSQL's shared
  buffers and the page cache stay as they are, which only a restart of the server and a dropped page cache would
  change); and, with ``--restart CMD``, truly cold: ``--restarts`` times, CMD (a shell command that restarts
  PostgreSQL and drops the page cache, as root; nothing is assumed about how) run, the server waited for, then
  the first request timed (a new backend, empty shared buffers, the index and heap pages read from disk) and the
  one after it. Its anchor, in the same run: the same page's query written as an equality on the study (``study_id =
  X ORDER BY seq DESC``), which PostgreSQL answers by walking the chain's seq index past every newer event;
- the CSV export of the study's events: wall time, rows, bytes and this process's peak RSS above what it was before
  (sampled every 50 ms). On PostgreSQL the export is itself a COPY whose columns are formatted in SQL as the Python
  path formats them; its anchor: PostgreSQL's own ``COPY (SELECT the same rows and columns, unformatted) TO
  STDOUT``.

    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/ceres_audit   # a database of its own
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/audit.py --events 1000000
    .venv/bin/python bench/audit.py --events 1000000 --restarts 10 \
        --restart "pg_ctlcluster --skip-systemctl-redirect 15 main restart && sync && echo 3 > /proc/sys/vm/drop_caches"

The seeded events stay (the log is append-only): run it on a database of its own. A second run with the same
``--study`` measures the events already there.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


# The CSV's anchor: the same rows and columns, newest first, written by PostgreSQL itself.
COPY = ("COPY (SELECT seq, created_at, actor_label, actor_id, action, target_type, target_id, target_label, before, "
        "after, hash FROM audit_auditevent WHERE study_id = %s ORDER BY seq DESC) TO STDOUT WITH (FORMAT csv)")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class PeakRSS(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak = _rss_mib()
        self.running = True

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, _rss_mib())
            time.sleep(0.05)


def _percentiles(times: list[float]) -> str:
    p99 = statistics.quantiles(times, n=100, method="inclusive")[98]
    return f"{statistics.median(times) * 1000:.1f} / {p99 * 1000:.1f} / {max(times) * 1000:.1f}"


def _seed(args, password: str):
    from django.db import connection, transaction

    from portal.audit.services import Entry, record, record_many
    from portal.demo.seeding import seed_study
    from portal.studies.services.study import create_study

    started = time.perf_counter()
    report = seed_study(args.study, episodes=1, headsets=1, demonstrators=1, password=password)
    study = report.study
    other = create_study("bench", code=f"{args.study}-other", title="Another study")
    coordinator = report.logins["coordinator"]
    with transaction.atomic():
        record_many(Entry("bench", "sample.made", study, after={"n": n}) for n in range(args.events))
    with transaction.atomic():
        record_many(Entry(coordinator, "accounts.login", None, after={"ip": "10.0.0.1"}) if n % 2 else
                    Entry("bench", "sample.made", other, after={"n": n}) for n in range(args.after))
    record("bench", "sample.checked", study)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE audit_auditevent")
    print(f"seeded {args.events:,} events of study {args.study}, then {args.after:,} others, then one of the "
          f"study, in {time.perf_counter() - started:.0f} s", flush=True)
    return study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the study (default 1 000 000)")
    parser.add_argument("--after", type=int, default=300_000, help="other events after them (default 300 000)")
    parser.add_argument("--study", default="auditbench")
    parser.add_argument("--requests", type=int, default=50, help="first-page requests each way (default 50)")
    parser.add_argument("--restart", help="a shell command that restarts PostgreSQL and drops the page cache")
    parser.add_argument("--restarts", type=int, default=10, help="cold rounds with --restart (default 10)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        parser.error("set DATABASE_URL to a PostgreSQL database of its own")
    if args.events < 1 or args.after < 0 or args.requests < 2:
        parser.error("--events must be at least 1, --after at least 0, --requests at least 2")
    os.environ.update({"CERES_ALLOWED_HOSTS": "testserver", "CERES_REQUIRE_2FA": "0", "CERES_DEBUG": "0",
                       "CERES_LOG_LEVEL": "WARNING"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    warnings.filterwarnings("ignore", message="No directory at")  # static files are not collected for this run
    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from portal.audit.models import AuditEvent
    from portal.studies.models import Study

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    print(f"# audit: commit {commit.stdout.strip() or '?'}, load average before "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    study = Study.objects.filter(code=args.study).first()
    if study is None:
        study = _seed(args, secrets.token_urlsafe(24))
    else:
        print(f"study {args.study} exists: measuring the events already there", flush=True)
    total = AuditEvent.objects.count()
    mine = AuditEvent.objects.filter(study_id=study.pk).count()
    print(f"log: {total:,} events, {mine:,} of the study\n", flush=True)

    client = Client()
    client.force_login(get_user_model().objects.get(username=f"{args.study}-coordinator"))
    url = reverse("audit-list", args=[study.code])

    def page() -> float:
        started = time.perf_counter()
        response = client.get(url)
        took = time.perf_counter() - started
        assert response.status_code == 200, response.status_code
        return took

    for _ in range(5):
        page()
    warm = [page() for _ in range(args.requests)]
    cold = []
    for _ in range(args.requests):
        connection.close()
        cold.append(page())

    restarted, after_restart = [], []
    for _ in range(args.restarts if args.restart else 0):
        connection.close()
        subprocess.run(["/bin/sh", "-c", args.restart], check=True)  # the operator's own command
        for _attempt in range(600):  # until the server accepts connections again
            try:
                connection.ensure_connection()
                break
            except Exception:  # the driver's error while the server starts
                time.sleep(0.1)
        connection.close()  # the request opens its own: its backend's start counts, as a new worker's would
        restarted.append(page())
        after_restart.append(page())

    with CaptureQueriesContext(connection) as captured:
        page()
    sent = next(query["sql"] for query in captured.captured_queries
                if '"audit_auditevent"' in query["sql"] and query["sql"].endswith("LIMIT 51"))
    plain = AuditEvent.objects.filter(study_id=study.pk).order_by("-seq")[:51]

    def timed(sql: str, params=()) -> list[float]:
        times = []
        with connection.cursor() as cursor:
            for _ in range(min(args.requests, 20)):
                started = time.perf_counter()
                cursor.execute(sql, params)
                cursor.fetchall()
                times.append(time.perf_counter() - started)
        return times

    query, anchor = timed(sent), timed(*plain.query.sql_with_params())
    print("| first page of the audit view | p50 / p99 / max ms |")
    print("| --- | --- |")
    print(f"| warm, {args.requests} requests | {_percentiles(warm)} |")
    print(f"| a new connection each, {args.requests} requests | {_percentiles(cold)} |")
    if restarted:
        print(f"| cold: PostgreSQL restarted and the page cache dropped before each, {len(restarted)} requests | "
              f"{_percentiles(restarted)} |")
        print(f"| the request after each of those | {_percentiles(after_restart)} |")
    print(f"| its query alone, {len(query)} runs | {_percentiles(query)} |")
    print(f"| anchor: its query as `study_id = X ORDER BY seq DESC` alone, {len(anchor)} runs | "
          f"{_percentiles(anchor)} |\n", flush=True)

    watch = PeakRSS()
    before = watch.peak
    watch.start()
    started = time.perf_counter()
    response = client.get(reverse("audit-export", args=[study.code]))
    size = lines = 0
    for piece in response.streaming_content:
        size += len(piece)
        lines += piece.count(b"\n")
    took = time.perf_counter() - started
    watch.running = False
    watch.join()
    started = time.perf_counter()
    copied = 0
    with connection.cursor() as cursor, cursor.cursor.copy(COPY, [study.pk]) as copy:
        for data in copy:
            copied += len(data)
    floor = time.perf_counter() - started
    print("| CSV of the study's events | s | rows | MB | peak RSS above before, MiB |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| the export (streamed through the view) | {took:.1f} | {lines - 1:,} | {size / 1e6:.1f} | "
          f"{watch.peak - before:.0f} (of {watch.peak:.0f}) |")
    print(f"| anchor: PostgreSQL's COPY of the same rows | {floor:.1f} | | {copied / 1e6:.1f} | |")
    print(f"\nexport / COPY: {took / floor:.1f}; load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
