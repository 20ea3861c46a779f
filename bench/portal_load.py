"""Load figures of the portal's pages and API on a study seeded by ``manage.py seed_scale``.

The portal runs under gunicorn with the production configuration (``infra/production/gunicorn.conf.py``,
``CERES_DEBUG=0``, ``CERES_HTTPS=1`` behind a proxy header, PostgreSQL); this process is the client. For
every endpoint it prints single-client p50/p95/p99 and the response size, then for the first page of every
list (and the deep pages the issue measured) requests/s and p99 with 16 clients at once, and the memory
(RSS) of the gunicorn workers while it ran. See docs/figures.md.

    .venv/bin/pip install -e ".[test,production]"      # gunicorn, from the production extra
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/ceres_scale
    .venv/bin/python manage.py migrate
    .venv/bin/python manage.py seed_scale --episodes 100000 --audit-events 1000000
    .venv/bin/python bench/portal_load.py --study scale

Sessions are made here (the seeded coordinator and site administrator, signed in without a password), with
the same secret key the server is given. "Page 1000" is the cursor of row 49 951 in the list's own order,
exactly the link a user reaches by following "Older" 999 times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


@dataclass
class Endpoint:
    name: str
    path: str
    who: str = "coordinator"  # whose session: coordinator, ethics, researcher or admin
    concurrent: bool = False  # also measured with many clients at once


@dataclass
class Samples:
    times: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    failures: dict[int, int] = field(default_factory=dict)
    server_cpu: float = 0.0  # seconds of the workers' CPU while these requests ran

    def add(self, seconds: float, response: httpx.Response) -> None:
        self.times.append(seconds)
        self.sizes.append(len(response.content))
        if response.status_code != 200:
            self.failures[response.status_code] = self.failures.get(response.status_code, 0) + 1

    def percentile(self, p: int) -> float:
        if len(self.times) < 2:
            return self.times[0] if self.times else float("nan")
        return statistics.quantiles(self.times, n=100, method="inclusive")[p - 1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_env(args, data_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CERES_")}
    env.update({
        "DATABASE_URL": os.environ["DATABASE_URL"],
        "CERES_DEBUG": "0",
        "CERES_HTTPS": "1",
        "CERES_SECRET_KEY": secrets.token_urlsafe(64),
        "CERES_ALLOWED_HOSTS": "127.0.0.1",
        "CERES_DATA_DIR": str(data_dir),
        "CERES_REQUIRE_2FA": "0",
        # Throttling stays on (its cache look-ups are part of each API request), at a rate this run stays under.
        "CERES_API_RATE": "1000000/hour",
        "CERES_LOG_LEVEL": "WARNING",
    })
    if args.cache_url:
        env["CERES_CACHE_URL"] = args.cache_url
    return env


def _prepare(args) -> tuple[dict[str, str], list[Endpoint]]:
    """Sessions of the seeded users and the endpoints' URLs (deep cursors, a headset, a designator)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django_scopes import scope

    from portal.audit import study_log
    from portal.audit.models import AuditEvent
    from portal.core.pagination import Keyset
    from portal.recordings.models import Episode, Recording
    from portal.releases.models import ReleaseItem, ReleaseRequest
    from portal.studies.models import Demonstrator, Headset, Study

    study = Study.objects.get(code=args.study)
    User = get_user_model()
    cookies = {}
    for who in ("coordinator", "ethics", "researcher", "admin"):
        username = f"{study.code}-{who}"
        if not User.objects.filter(username=username).exists():
            continue  # a study seeded without releases has no researcher
        client = Client()
        client.force_login(User.objects.get(username=username))
        cookies[who] = client.cookies["sessionid"].value

    def deep(queryset, ordering: tuple[str, ...], row_number: int = 49_950) -> str | None:
        """The cursor of row ``row_number`` (or of the last row, in a shorter list); None for an empty list."""
        keyset = Keyset(*ordering)
        rows = queryset.order_by(*keyset.order_by()).only(*keyset.names)
        row = rows[row_number - 1:row_number].first() or rows.last()
        return None if row is None else keyset.encode(row, backwards=False)

    with scope(study=study):
        recording = Recording.objects.filter(state=Recording.State.VERIFIED).only("uid").first()
        headset = Headset.objects.order_by("headset_id").first().headset_id
        designator = Demonstrator.objects.order_by("designator").first().designator
        recordings_1000 = deep(Recording.objects.all(), ("-created_at", "-pk"))
        episodes_1000 = deep(Episode.objects.all(), ("-episode_index",))
        api_episodes_1000 = deep(Episode.objects.all(), ("episode_index",))
        events = AuditEvent.objects.filter(study_id=study.pk)
        audit_1000 = deep(events, study_log.ORDER)
        actor = f"{study.code}-coordinator"
        audit_actor_1000 = deep(events.filter(actor_label=actor), study_log.ORDER, 5_000)
        requests_ = ReleaseRequest.objects.all()
        releases_deep = deep(requests_, ("-number",), 450)
        released = ReleaseItem.objects.filter(request__state=ReleaseRequest.State.RELEASED)
        browse_deep = deep(released, ("-request_id", "-episode_index"), 1000)
        last_release = requests_.filter(state=ReleaseRequest.State.RELEASED).order_by("-number").first()
        awaiting = requests_.filter(state=ReleaseRequest.State.AWAITING_APPROVAL).order_by("-number").first()
    base = f"/studies/{study.code}"
    api = f"/api/studies/{study.code}"
    endpoints = [
        Endpoint("dashboard", "/"),
        Endpoint("study overview", f"{base}/"),
        Endpoint("recordings list", f"{base}/recordings/", concurrent=True),
        Endpoint("recordings page 1000", f"{base}/recordings/?cursor={recordings_1000}", concurrent=True),
        Endpoint("recordings ?state=verified", f"{base}/recordings/?state=verified", concurrent=True),
        Endpoint("recordings ?state=quarantined", f"{base}/recordings/?state=quarantined"),
        Endpoint("recordings ?headset=", f"{base}/recordings/?headset={headset}"),
        Endpoint("recordings ?demonstrator=", f"{base}/recordings/?demonstrator={designator}"),
        Endpoint("recording detail", f"{base}/recordings/{recording.uid}/"),
        Endpoint("episodes list", f"{base}/recordings/episodes/", concurrent=True),
        Endpoint("episodes page 1000", f"{base}/recordings/episodes/?cursor={episodes_1000}"),
        Endpoint("episodes ?receipt=mismatch", f"{base}/recordings/episodes/?receipt=mismatch"),
        Endpoint("demonstrators list", f"{base}/demonstrators/", concurrent=True),
        Endpoint("headsets list", f"{base}/headsets/", concurrent=True),
        Endpoint("suggest headsets", f"{base}/headsets/suggest/?q=HS-01"),
        Endpoint("suggest demonstrators", f"{base}/demonstrators/suggest/?q={designator[:4]}"),
        Endpoint("API recordings page 1", f"{api}/recordings/", concurrent=True),
        Endpoint("API recordings page 1000", f"{api}/recordings/?cursor={recordings_1000}", concurrent=True),
        Endpoint("API episodes page 1", f"{api}/episodes/", concurrent=True),
        Endpoint("API episodes page 1000", f"{api}/episodes/?cursor={api_episodes_1000}", concurrent=True),
        Endpoint("API demonstrators", f"{api}/demonstrators/", concurrent=True),
        Endpoint("API headsets", f"{api}/headsets/"),
        Endpoint("releases list", f"{base}/releases/", concurrent=True),
        Endpoint("releases deep page", f"{base}/releases/?cursor={releases_deep}"),
        Endpoint("releases ?state=awaiting_approval (ethics)", f"{base}/releases/?state=awaiting_approval",
                 who="ethics", concurrent=True),
        Endpoint("audit view", f"{base}/audit/", concurrent=True),
        Endpoint("audit view page 1000", f"{base}/audit/?cursor={audit_1000}", concurrent=True),
        Endpoint("audit view ?action=recording.*", f"{base}/audit/?action=recording.%2A"),
        Endpoint("audit view ?actor= page 100", f"{base}/audit/?actor={actor}&cursor={audit_actor_1000}"),
        Endpoint("API audit events", f"{api}/audit-events/", concurrent=True),
        Endpoint("API audit events page 1000", f"{api}/audit-events/?cursor={audit_1000}"),
        Endpoint("API release requests", f"{api}/release-requests/"),
        Endpoint("admin audit events", "/admin/audit/auditevent/", who="admin", concurrent=True),
        Endpoint("admin audit events page 5000", "/admin/audit/auditevent/?p=5000", who="admin", concurrent=True),
        Endpoint("admin audit events ?action=", "/admin/audit/auditevent/?action=recording.quarantined",
                 who="admin"),
        Endpoint("admin recordings", "/admin/recordings/recording/", who="admin", concurrent=True),
        Endpoint("admin episodes", "/admin/recordings/episode/", who="admin"),
    ]
    # A study seeded without release requests has no deep release page to reach.
    endpoints = [endpoint for endpoint in endpoints if "cursor=None" not in endpoint.path]
    if awaiting is not None:
        endpoints.append(Endpoint("release detail awaiting approval (ethics)", f"{base}/releases/{awaiting.number}/",
                                  who="ethics"))
    if "researcher" in cookies and last_release is not None:
        endpoints += [
            Endpoint("research home (researcher)", "/research/", who="researcher"),
            Endpoint("browse released (researcher)", f"{base}/released/", who="researcher", concurrent=True),
            Endpoint("browse released deep page", f"{base}/released/?cursor={browse_deep}", who="researcher"),
            Endpoint("browse released ?release=", f"{base}/released/?release={last_release.number}",
                     who="researcher"),
            Endpoint("released release page", f"{base}/released/{last_release.number}/", who="researcher"),
            Endpoint("my links (researcher)", "/research/links/", who="researcher"),
            Endpoint("API releases (researcher)", f"{api}/releases/", who="researcher", concurrent=True),
            Endpoint("API released episodes (researcher)", f"{api}/released-episodes/", who="researcher",
                     concurrent=True),
            Endpoint("API released episodes deep", f"{api}/released-episodes/?cursor={browse_deep}",
                     who="researcher"),
        ]
    return cookies, endpoints


class MemoryWatch(threading.Thread):
    """RSS of every gunicorn worker (children of the master), sampled twice a second."""

    def __init__(self, master: int):
        super().__init__(daemon=True)
        self.master = master
        self.rss: dict[int, list[int]] = {}
        self.running = True

    def cpu_seconds(self) -> dict[int, float]:
        """CPU time (user + system) each worker has used so far."""
        used = {}
        for pid in self._children():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            used[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return used

    def _children(self) -> list[int]:
        try:
            return [int(pid) for pid in Path(f"/proc/{self.master}/task/{self.master}/children").read_text().split()]
        except OSError:
            return []

    def run(self) -> None:
        while self.running:
            for pid in self._children():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                # A worker being recycled has exited (no VmRSS line) before the master reaps it.
                kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), None)
                if kib is not None:
                    self.rss.setdefault(pid, []).append(kib // 1024)
            time.sleep(0.5)


def _headers(cookies: dict[str, str], endpoint: Endpoint) -> dict[str, str]:
    # What a browser and an API client send: pages as HTML, the API as JSON (not DRF's browsable pages).
    accept = "application/json" if endpoint.path.startswith("/api/") else "text/html"
    return {"Cookie": f"sessionid={cookies[endpoint.who]}", "X-Forwarded-Proto": "https", "Accept": accept}


def single_client(base_url: str, cookies, endpoints: list[Endpoint], requests: int, warmup: int,
                  watch: MemoryWatch) -> dict[str, Samples]:
    results = {}
    with httpx.Client(base_url=base_url, timeout=120) as client:
        for endpoint in endpoints:
            headers = _headers(cookies, endpoint)
            for _ in range(warmup):
                client.get(endpoint.path, headers=headers)
            samples = Samples()
            cpu_before = watch.cpu_seconds()
            for _ in range(requests):
                started = time.perf_counter()
                response = client.get(endpoint.path, headers=headers)
                samples.add(time.perf_counter() - started, response)
            cpu_after = watch.cpu_seconds()
            # Only workers alive throughout count (one recycled meanwhile takes its CPU time with it).
            samples.server_cpu = sum(cpu_after[pid] - cpu_before[pid] for pid in cpu_after if pid in cpu_before)
            results[endpoint.name] = samples
    return results


async def _many_clients(base_url: str, cookies, endpoint: Endpoint, clients: int, seconds: float
                        ) -> tuple[Samples, float]:
    samples = Samples()
    headers = _headers(cookies, endpoint)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as client:
        deadline = time.perf_counter() + seconds

        async def one_client() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                response = await client.get(endpoint.path, headers=headers)
                samples.add(time.perf_counter() - started, response)

        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        return samples, time.perf_counter() - started


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", default="scale")
    parser.add_argument("--requests", type=int, default=200, help="sequential requests per endpoint")
    parser.add_argument("--warmup", type=int, default=10, help="requests per endpoint before measuring")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each many-clients run")
    parser.add_argument("--only", help="measure only endpoints whose name contains this text (several: separated by "
                                       "commas, e.g. 'list,audit view')")
    parser.add_argument("--cache-url", help="CERES_CACHE_URL of the server (production: Redis); default local memory")
    parser.add_argument("--no-recycle", action="store_true",
                        help="run workers without max_requests, so a growing worker shows in the memory figures")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        parser.error("set DATABASE_URL to the seeded PostgreSQL database")

    with tempfile.TemporaryDirectory(prefix="ceres-bench-") as scratch:
        env = _server_env(args, Path(scratch))
        os.environ.update({key: value for key, value in env.items() if key.startswith("CERES_")})
        cookies, endpoints = _prepare(args)
        if args.only:
            wanted = [text.strip() for text in args.only.split(",") if text.strip()]
            endpoints = [e for e in endpoints if any(text in e.name for text in wanted)]
        port = _free_port()
        command = [str(Path(sys.executable).parent / "gunicorn"), "--config", "infra/production/gunicorn.conf.py",
                   "--bind", f"127.0.0.1:{port}", "portal.wsgi"]
        if args.no_recycle:
            command += ["--max-requests", "0"]
        log = open(Path(scratch) / "gunicorn.log", "w")  # noqa: SIM115
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        watch = MemoryWatch(server.pid)
        try:
            base_url = f"http://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    if httpx.get(f"{base_url}/healthz", headers={"X-Forwarded-Proto": "https"}).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            else:
                raise SystemExit("gunicorn did not answer /healthz within 30 s")
            watch.start()
            print(f"# portal_load: study {args.study}, {len(watch._children())} gunicorn workers, "
                  f"load average before {os.getloadavg()[0]:.1f}", flush=True)
            single = single_client(base_url, cookies, endpoints, args.requests, args.warmup, watch)
            print(f"\n## Single client ({args.requests} requests each, after {args.warmup} to warm up)\n")
            print("| endpoint | p50 ms | p95 ms | p99 ms | max ms | server CPU ms/request | bytes | non-200 |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for name, samples in single.items():
                print(f"| {name} | {_ms(samples.percentile(50))} | {_ms(samples.percentile(95))} | "
                      f"{_ms(samples.percentile(99))} | {_ms(max(samples.times))} | "
                      f"{_ms(samples.server_cpu / len(samples.times))} | {max(samples.sizes):,} | "
                      f"{samples.failures or '-'} |", flush=True)
            print(f"\n## {args.clients} clients at once ({args.seconds:.0f} s each)\n")
            print("| endpoint | requests/s | p50 ms | p99 ms | non-200 |")
            print("| --- | --- | --- | --- | --- |")
            for endpoint in endpoints:
                if not endpoint.concurrent:
                    continue
                samples, took = asyncio.run(_many_clients(base_url, cookies, endpoint, args.clients, args.seconds))
                print(f"| {endpoint.name} | {len(samples.times) / took:.1f} | {_ms(samples.percentile(50))} | "
                      f"{_ms(samples.percentile(99))} | {samples.failures or '-'} |", flush=True)
        finally:
            watch.running = False
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=90)
            log.close()
        print("\n## gunicorn workers' memory (RSS, MiB)\n")
        print("| worker | samples | first | max | last |")
        print("| --- | --- | --- | --- | --- |")
        for pid, values in watch.rss.items():
            print(f"| {pid} | {len(values)} | {values[0]} | {max(values)} | {values[-1]} |")
        print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
