"""Release benchmark (prints figures; not a test).

    set -a; eval "$(bash infra/swift/start.sh)"; set +a   # the S3 gateway, its CERES_S3_* variables exported
    .venv/bin/pip install awscli                # the baseline's `aws` command (a benchmark-only dependency)
    .venv/bin/python bench/release.py [--episodes 8] [--seconds 60] [--size 640x360] [--repeat 3]
                                      [--threads 8]

Exports ``--episodes`` generated captures through the portal's own pipeline (a study of its own on SQLite in
a scratch folder, new buckets on the gateway), asks for ``--repeat`` releases of all of them and has two
officers approve each. Then, in alternating paired runs:

- **the release job**: ``publish_release``, what the heavy worker runs: a shard object above
  ``CERES_S3_VERIFIED_COPY_MIN_BYTES`` whose ETag is still the MD5 the verification job recorded of its checked
  bytes copied by the gateway into the releases bucket without a read (``CopyObject`` with
  ``x-amz-copy-source-if-match``), every other one read once from the shards bucket, checked against its receipt
  and copied (or, at most 1 MiB, stored by a ``PUT``); each copy's ETag checked against the MD5 of the bytes
  checked (``storage.copy``, ``--threads`` objects at once), then the card files and the signed manifest;
- **the baseline**: ``aws s3 cp --recursive`` of the same objects from a local folder to the same gateway
  (awscli's defaults: 10 requests at once, 8 MiB parts), which neither checks a receipt nor writes a manifest.

Prints the bytes, each run's seconds and MB/s, the medians, and the ratio baseline / job (at least 1.0 means the
job is as fast as the copy by hand: goal 1 of issue 26).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _environment(scratch: Path, threads: int, bucket_prefix: str) -> dict[str, str]:
    """The portal's settings for this run: its own data folder (SQLite, the filesystem broker) and new buckets."""
    if not os.environ.get("CERES_S3_ENDPOINT_URL"):
        raise SystemExit('export the CERES_S3_* variables: set -a; eval "$(bash infra/swift/start.sh)"; set +a')
    run = uuid.uuid4().hex[:8]
    env = {"CERES_DATA_DIR": str(scratch / "data"), "CERES_STORAGE": "s3", "CERES_RELEASE_THREADS": str(threads),
           "DJANGO_SETTINGS_MODULE": "portal.settings"}
    for name in ("captures", "shards", "releases"):
        env[f"CERES_S3_BUCKET_{name.upper()}"] = f"{bucket_prefix}-{run}-{name}"
    for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    os.environ.update(env)
    return env


def _buckets() -> None:
    from django.conf import settings

    from portal.core import storage

    for name in settings.STORAGE_NAMES:
        getattr(storage, name)().bucket.create()


def _remove_buckets() -> None:
    from django.conf import settings

    from portal.core import storage

    for name in settings.STORAGE_NAMES:
        bucket = getattr(storage, name)().bucket
        for stored in bucket.objects.all():  # one at a time: Swift refuses DeleteObjects without Content-MD5
            stored.delete()
        bucket.delete()


def _episodes(scratch: Path, count: int, seconds: float, size: tuple[int, int]):
    """``count`` episodes of the demo study, captured, ingested, exported and verified by the pipeline."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django_scopes import scope

    from exporter.generate import generate_capture
    from portal.recordings.demo import demo_registry
    from portal.recordings.models import Episode
    from portal.recordings.services.export import export_recording
    from portal.recordings.services.ingest import ingest_path
    from portal.recordings.services.verification import verify_episode
    from portal.studies.services.face_policy import set_face_policy

    with redirect_stdout(io.StringIO()):
        call_command("migrate", verbosity=0)
        call_command("demo_setup")
    registry = demo_registry()
    # What is measured is the copy of a shard as exported: faces are not looked for (no detection, no redaction).
    set_face_policy(get_user_model().objects.get(username="ethics1"), registry.study, "off")
    episodes = []
    with scope(study=registry.study):
        for i in range(count):
            # Recorded now: the demo registry's consent covers recordings from its set-up on.
            capture = generate_capture(scratch / "captures" / f"capture-{i:03d}", seconds=seconds, seed=100 + i,
                                       width=size[0], height=size[1], study=registry.study_block(),
                                       recorded_at=datetime.now(UTC).replace(microsecond=0))
            recording = ingest_path(registry.coordinator, registry.study, capture)
            export_recording(recording.pk)
            recording.refresh_from_db()
            episode = Episode.objects.select_related("recording").filter(recording=recording).first()
            if episode is None:
                raise SystemExit(f"capture {i} was not exported: {recording.state}: {recording.reason}")
            verify_episode(episode)
            episodes.append(episode)
            print(f"  episode {i + 1}/{count} exported and verified", flush=True)
    return registry, episodes


def _approved_requests(registry, episodes, count: int):
    from django.contrib.auth import get_user_model
    from django_scopes import scope

    from portal.releases.services import gate, release_requests
    from portal.releases.services.approval import approve

    User = get_user_model()
    officers = [User.objects.get(username=name) for name in ("ethics1", "ethics2")]
    made = []
    with scope(study=registry.study):
        for n in range(count):
            request = release_requests.create_request(registry.coordinator, registry.study, episodes=episodes,
                                              purpose=f"bench run {n}")
            gate.inspect_request(request)
            release_requests.submit(registry.coordinator, request)
            request.refresh_from_db()
            for officer in officers:
                approve(officer, request, manifest_sha256=request.manifest_sha256)
            made.append(request)
    return made


def _local_copy(request, folder: Path) -> list[tuple[Path, str]]:
    """The release's shard files in a local folder laid out as the release is (episode-NNNNNN/...)."""
    from django_scopes import scope

    from portal.core import storage

    shards, files = storage.shards(), []
    with scope(study=request.study):
        items = list(request.items.select_related("episode"))
    for item in items:
        for entry in item.files:
            path = folder / item.folder / entry["path"]
            storage.fetch(shards, item.episode.prefix + entry["path"], path)
            files.append((path, f"{item.folder}/{entry['path']}"))
    return files


def _publish(request) -> float:
    from django_scopes import scope

    from portal.releases.models import ReleaseRequest
    from portal.releases.services import publish

    started = time.perf_counter()
    with scope(study=request.study):
        publish.publish_release(request.pk)
        took = time.perf_counter() - started
        state = ReleaseRequest.objects.get(pk=request.pk).state
    if state != ReleaseRequest.State.RELEASED:
        raise SystemExit(f"release {request.number} ended {state}")
    return took


def _aws(folder: Path, prefix: str) -> float:
    from django.conf import settings

    options = settings.STORAGES["releases"]["OPTIONS"]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": options["access_key"], "AWS_SECRET_ACCESS_KEY": options["secret_key"],
           "AWS_DEFAULT_REGION": options["region_name"]}
    aws = Path(sys.executable).with_name("aws")
    command = [str(aws) if aws.exists() else "aws", "s3", "cp", "--recursive", "--only-show-errors",
               "--endpoint-url", options["endpoint_url"],
               str(folder), f"s3://{options['bucket_name']}/{prefix}"]
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each generated capture")
    parser.add_argument("--size", default="640x360", help="camera frame size")
    parser.add_argument("--repeat", type=int, default=3, help="paired runs")
    parser.add_argument("--threads", type=int, default=8, help="CERES_RELEASE_THREADS of the release job")
    parser.add_argument("--bucket-prefix", default="ceres-bench",
                        help="the run's buckets are PREFIX-<run>-{captures,shards,releases}, removed at the end")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))

    with tempfile.TemporaryDirectory(prefix="ceres-bench-release-") as scratch_name:
        scratch = Path(scratch_name)
        _environment(scratch, args.threads, args.bucket_prefix)
        import django

        django.setup()
        _buckets()
        try:
            _run(args, scratch, size)
        finally:
            _remove_buckets()


def _run(args, scratch: Path, size: tuple[int, int]) -> None:
    print(f"# release: {args.episodes} episodes of {args.seconds:g} s at {args.size}, {args.threads} threads, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    registry, episodes = _episodes(scratch, args.episodes, args.seconds, size)
    requests_ = _approved_requests(registry, episodes, args.repeat)
    files = _local_copy(requests_[0], scratch / "folder")
    total = sum(path.stat().st_size for path, _ in files)
    print(f"# {len(files)} objects, {total / 1e6:.1f} MB per release (+ manifest and signature)\n", flush=True)
    print("| run | release job s | aws s3 cp s | aws / job |")
    print("| --- | --- | --- | --- |")
    job, aws = [], []
    for n, request in enumerate(requests_):
        # Alternate which goes first, so neither always meets the other's leftovers (the gateway's flushes).
        if n % 2:
            aws.append(_aws(scratch / "folder", f"bench-aws-{n}/"))
            job.append(_publish(request))
        else:
            job.append(_publish(request))
            aws.append(_aws(scratch / "folder", f"bench-aws-{n}/"))
        print(f"| {n + 1} | {job[-1]:.2f} | {aws[-1]:.2f} | {aws[-1] / job[-1]:.2f} |", flush=True)
    med = {name: statistics.median(values) for name, values in (("job", job), ("aws", aws))}
    print()
    for name, label in (("job", "release job"), ("aws", "aws s3 cp")):
        print(f"{label}: median {med[name]:.2f} s, {total / med[name] / 1e6:.1f} MB/s")
    print(f"aws / release job: {med['aws'] / med['job']:.2f}x (goal >= 1.0); "
          f"median of the paired ratios {statistics.median(a / j for a, j in zip(aws, job, strict=True)):.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
