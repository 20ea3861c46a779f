"""One-ZIP download benchmark (prints figures; not a test).

    .venv/bin/python bench/zip_stream.py [--size-mb 1024] [--file-mb 32] [--repeat 3]
    CERES_STORAGE=s3 (with the CERES_S3_* variables) to run it on S3 instead of local folders

Lays out a release-shaped folder of ``--size-mb`` of random bytes on the storage the settings name (new buckets
on S3, a scratch folder otherwise): files of ``--file-mb`` like an episode's videos and data, and a handful of
small ones like its metadata. Two views serve them over HTTP from Django's threaded WSGI server (what
``runserver`` runs) on a local port, read by an ``httpx`` client in this process to the last byte and dropped; in
alternating paired runs:

- **the ZIP**: ``services.archives.build`` (what the one-ZIP download sends once its live check has passed):
  every object read from the storage in blocks, its SHA-256 and length checked, into a stored ZIP, out of a
  ``StreamingHttpResponse`` with its ``Content-Length``;
- **the plain files**: each object through ``core.http.ranged_response``, what a portal download link serves,
  one GET after the other on one connection (as a browser fetching the links in turn).

Prints the bytes, each run's seconds and MB/s, the medians, the ratio ZIP / plain (the goal: at least 0.8), and
how much the process's memory (RSS: server and client together) grew while the ZIPs streamed. The live check,
once per request, is left out of both; the portal's middleware too.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BLOCK = 1 << 20


def _environment(scratch: Path) -> None:
    """The portal's settings for this run: its own data folder (SQLite) and, on S3, new buckets."""
    os.environ.update({"CERES_DATA_DIR": str(scratch / "data"), "DJANGO_SETTINGS_MODULE": "portal.settings"})
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    if os.environ.get("CERES_STORAGE") == "s3":
        run = uuid.uuid4().hex[:8]
        for name in ("captures", "shards", "releases"):
            os.environ[f"CERES_S3_BUCKET_{name.upper()}"] = f"ceres-bench-{run}-{name}"


def _bucket(create: bool) -> None:
    from portal.core import storage

    store = storage.releases()
    if not hasattr(store, "bucket"):
        return
    if create:
        store.bucket.create()
    else:
        store.bucket.objects.all().delete()
        store.bucket.delete()


def _layout(size: int, file_size: int) -> list[tuple[str, int]]:
    """Paths and lengths of a release-shaped folder of ``size`` bytes."""
    files, left, index = [], size, 0
    while left > 0:
        length = min(file_size, left)
        files.append((f"episode-{index // 4:06d}/videos/observation.images.cam/file-{index:03d}.bin", length))
        left -= length
        index += 1
    files += [(f"episode-{i:06d}/meta/info.json", 2048) for i in range(max(1, index // 4))]
    return files


def _store(prefix: str, layout: list[tuple[str, int]]):
    """The files written to the releases storage (random bytes), as the ZIP's members."""
    from portal.core import storage
    from portal.research.services.archives import Member

    store, members = storage.releases(), []
    for path, length in layout:
        data = os.urandom(length)
        storage.put(store, prefix + path, io.BytesIO(data))
        members.append(Member(path, prefix + path, None, length, hashlib.sha256(data).hexdigest()))
        del data
    return members


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class _Peak(threading.Thread):
    """The highest RSS of this process while it runs, sampled every 20 ms."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self._done = _rss(), threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, _rss())

    def stop(self) -> int:
        self._done.set()
        self.join()
        return max(self.peak, _rss())


MEMBERS: list = []  # what the benchmark's two views serve
urlpatterns: list = []  # this module is the server's URL configuration, set once Django is


def _zip_view(request):
    from django.http import StreamingHttpResponse

    from portal.core import storage
    from portal.research.services import archives

    archive = archives.build(MEMBERS, folder="BENCH-release-0001", store=storage.releases())
    response = StreamingHttpResponse(archive.chunks(), content_type="application/zip")
    response["Content-Length"] = str(archive.size)
    response["Content-Disposition"] = f'attachment; filename="{archive.filename}"'
    return response


def _file_view(request, index: int):
    from portal.core import storage
    from portal.core.http import ranged_response

    member = MEMBERS[index]
    return ranged_response(request, storage.releases(), member.object_name, content_type="application/octet-stream",
                           filename=Path(member.path).name)


def _urlpatterns():
    from django.urls import path

    return [path("release.zip", _zip_view), path("file/<int:index>", _file_view)]


class _Server:
    """Django's threaded WSGI server (what ``runserver`` runs) on a free local port, serving the two views."""

    def __init__(self):
        from django.core.handlers.wsgi import WSGIHandler
        from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args) -> None:
                pass

        self.server = ThreadedWSGIServer(("127.0.0.1", 0), Quiet)
        self.server.set_app(WSGIHandler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _get(client, url: str) -> tuple[int, int]:
    """Bytes read and the Content-Length announced of one GET, read to the end and dropped."""
    with client.stream("GET", url) as response:
        response.raise_for_status()
        read = sum(len(block) for block in response.iter_raw(BLOCK))
        return read, int(response.headers["Content-Length"])


def _zip(client, url: str) -> tuple[float, int]:
    start = time.perf_counter()
    read, announced = _get(client, f"{url}/release.zip")
    if read != announced:
        raise SystemExit(f"the ZIP sent {read} bytes, its Content-Length said {announced}")
    return time.perf_counter() - start, read


def _plain(client, url: str) -> tuple[float, int]:
    start, read = time.perf_counter(), 0
    for index in range(len(MEMBERS)):
        read += _get(client, f"{url}/file/{index}")[0]
    return time.perf_counter() - start, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="the release's size (default 1024 MB)")
    parser.add_argument("--file-mb", type=int, default=32, help="the size of its large files (default 32 MB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.size_mb < 1 or args.file_mb < 1 or args.repeat < 1:
        raise SystemExit("--size-mb, --file-mb and --repeat are at least 1")
    with tempfile.TemporaryDirectory(prefix="ceres-zip-bench-") as scratch:
        _environment(Path(scratch))
        import django

        django.setup()
        from django.conf import settings
        from django.test.utils import override_settings

        global urlpatterns
        urlpatterns = _urlpatterns()
        _bucket(create=True)
        server = None
        try:
            with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=[], ALLOWED_HOSTS=["127.0.0.1"]):
                server = _Server()
                _run(args, settings.STORAGE_BACKEND, server.url)
        finally:
            if server is not None:
                server.close()
            _bucket(create=False)


def _run(args, backend: str, url: str) -> None:
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    MEMBERS[:] = _store("bench/release-0001/", _layout(args.size_mb * 1_000_000, args.file_mb * 1_000_000))
    total = sum(member.size for member in MEMBERS)
    print(f"{len(MEMBERS)} files, {total / 1e6:.0f} MB on {backend} storage, served over HTTP at {url}")
    zips, plains, growth = [], [], 0
    client = httpx.Client(timeout=120)
    _get(client, f"{url}/file/{len(MEMBERS) - 1}")  # one request first: the server and the client warmed up
    for run in range(args.repeat):
        before, peak = _rss(), _Peak()
        peak.start()
        seconds, sent = _zip(client, url)
        growth = max(growth, peak.stop() - before)
        zips.append(seconds)
        plain_seconds, plain_sent = _plain(client, url)
        plains.append(plain_seconds)
        if plain_sent != total:
            raise SystemExit(f"the plain files sent {plain_sent} bytes of {total}")
        print(f"run {run + 1}: ZIP {seconds:.2f} s ({sent / seconds / 1e6:.0f} MB/s), plain files "
              f"{plain_seconds:.2f} s ({total / plain_seconds / 1e6:.0f} MB/s)")
    zip_rate, plain_rate = total / statistics.median(zips), total / statistics.median(plains)
    print(f"median: ZIP {zip_rate / 1e6:.0f} MB/s, plain files {plain_rate / 1e6:.0f} MB/s; "
          f"ratio ZIP / plain {zip_rate / plain_rate:.2f} (goal: at least 0.80)")
    print(f"memory: RSS grew by at most {growth / (1 << 20):.1f} MiB while a ZIP streamed")


if __name__ == "__main__":
    main()
