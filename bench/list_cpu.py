"""A list page's CPU and queries, measured in this process: the test client through every middleware, with the
production settings (``CERES_DEBUG=0``, ``CERES_HTTPS=1``), on a study seeded by ``manage.py seed_scale``.

For each page it prints the CPU time of the process per request (the best of 5 batches, so that other processes'
bursts count less), the number of SQL queries of one request and the response's size; ``--profile`` adds a
cProfile of one page by CPU time (not wall time). See docs/figures.md, "Run D".

    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/ceres_scale
    .venv/bin/python bench/list_cpu.py --study scale                 # every list
    .venv/bin/python bench/list_cpu.py --study scale recordings --profile
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import secrets
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PAGES = {  # name: (whose session, path under /studies/<code>)
    "recordings": ("coordinator", "recordings/"),
    "episodes": ("coordinator", "recordings/episodes/"),
    "demonstrators": ("coordinator", "demonstrators/"),
    "headsets": ("coordinator", "headsets/"),
    "releases": ("coordinator", "releases/"),
    "releases-ethics": ("ethics", "releases/?state=awaiting_approval"),
    "audit": ("coordinator", "audit/"),
    "browse": ("researcher", "released/"),
    "overview": ("coordinator", ""),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help=f"pages to measure (default: all of {', '.join(PAGES)})")
    parser.add_argument("--study", default="scale")
    parser.add_argument("--requests", type=int, default=30, help="requests per page, in 5 batches")
    parser.add_argument("--profile", action="store_true", help="print a cProfile (CPU time) of each page")
    args = parser.parse_args()
    unknown = sorted(set(args.pages) - PAGES.keys())
    if unknown:
        parser.error(f"unknown page {', '.join(unknown)}; choose from {', '.join(PAGES)}")
    os.environ.update({"DJANGO_SETTINGS_MODULE": "portal.settings", "CERES_DEBUG": "0", "CERES_HTTPS": "1",
                       "CERES_SECRET_KEY": secrets.token_urlsafe(64), "CERES_ALLOWED_HOSTS": "testserver",
                       "CERES_REQUIRE_2FA": "0", "CERES_LOG_LEVEL": "WARNING"})
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    clients = {}
    for who in {who for who, _ in PAGES.values()}:
        client = Client(headers={"x-forwarded-proto": "https"})
        client.force_login(get_user_model().objects.get(username=f"{args.study}-{who}"))
        clients[who] = client
    batch = max(args.requests // 5, 1)
    print("| page | CPU ms per request | queries | bytes |\n| --- | --- | --- | --- |")
    for name in args.pages or list(PAGES):
        who, path = PAGES[name]
        client, url = clients[who], f"/studies/{args.study}/{path}"
        for _ in range(3):  # warm: templates loaded, connection open
            client.get(url, secure=True)
        queries: list[str] = []

        def counted(execute, sql, params, many, context, queries=queries):
            queries.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(counted):
            response = client.get(url, secure=True)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
        best = float("inf")
        for _ in range(5):
            started = time.process_time()
            for _ in range(batch):
                client.get(url, secure=True)
            best = min(best, (time.process_time() - started) / batch)
        print(f"| {name} | {best * 1000:.1f} | {len(queries)} | {len(response.content):,} |", flush=True)
        if args.profile:
            profile = cProfile.Profile(time.process_time)
            profile.enable()
            for _ in range(batch):
                client.get(url, secure=True)
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(60)


if __name__ == "__main__":
    main()
