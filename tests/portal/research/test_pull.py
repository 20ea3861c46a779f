"""``ceres-pull`` against a live portal (and, with CERES_STORAGE=s3, the S3 gateway serving the links): it
completes and verifies; killed half-way and run again it fetches only what was missing (counted as the links
the portal issued); links that expired mid-run are asked for again; a tampered object is reported and not left
under its name; a tampered manifest fails the signature check; a pulled one-dataset download with a hole in the
middle is kept for LeRobot's own reader (tests/compat/lerobot_check.sh)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import botocore.auth
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from exporter.release import MANIFEST, manifest_files
from portal.accounts.services import issue_token
from portal.core import storage
from portal.research.models import IssuedLink
from portal.research.services import catalogue, datasets, links

pytestmark = pytest.mark.django_db(transaction=True)
REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def known_portals(tmp_path, monkeypatch):
    """The portal's key is pinned in the test's own known-portals file, not the user's."""
    monkeypatch.setenv("CERES_KNOWN_PORTALS", str(tmp_path / "known-portals"))


@pytest.fixture
def token(researcher):
    return issue_token(researcher, name="pull")[1]


def ceres_pull(live_server, token: str, target: str, dest: Path, *extra: str, script: list[str] | None = None,
               env: dict | None = None, wait: bool = True):
    which = "--release" if "/release-" in target else "--dataset"
    command = [sys.executable, *(script or ["-m", "ceres_pull"]), "--portal", live_server.url, f"--token={token}",
               which, target, "--quiet", *extra, str(dest)]
    run_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    if not wait:
        return subprocess.Popen(command, cwd=REPO, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(command, cwd=REPO, env=run_env, capture_output=True, text=True, timeout=300)


def links_issued(study, since=None) -> list[str]:
    with scope(study=study):
        rows = IssuedLink.objects.all() if since is None else IssuedLink.objects.filter(issued_at__gt=since)
        return list(rows.order_by("pk").values_list("path", flat=True))


def stored_manifest(release) -> dict:
    return json.loads(storages["releases"].open(release.prefix + MANIFEST).read())


def test_a_release_is_pulled_verified_and_every_link_logged(live_server, released, token, tmp_path):
    dest = tmp_path / "pulled"
    result = ceres_pull(live_server, token, f"{released.study.code}/release-0001", dest)
    assert result.returncode == 0, result.stderr
    files = manifest_files(stored_manifest(released))
    assert (f"{len(files)} files verified ({len(files)} fetched, 0 already in place) and the manifest with its "
            f"signature") in result.stdout
    key = tmp_path / "key.pem"
    key.write_text(storage_key(live_server))
    verified = subprocess.run([sys.executable, "-m", "exporter", "verify-release", str(dest), "--public-key",
                               str(key)], cwd=REPO, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout
    assert not (dest / ".ceres-pull").exists()
    assert sorted(links_issued(released.study)) == sorted([MANIFEST, f"{MANIFEST}.sig", *(f["path"] for f in files)])

    again = ceres_pull(live_server, token, f"{released.study.code}/release-0001", dest)
    assert again.returncode == 0 and f"(0 fetched, {len(files)} already in place)" in again.stdout
    assert len(links_issued(released.study)) == len(files) + 4  # only the manifest and its signature again


def storage_key(live_server) -> str:
    import httpx

    return httpx.get(live_server.url + "/.well-known/ceres-release-key").text


def test_killed_half_way_and_run_again_it_fetches_only_what_is_missing(live_server, released, token, tmp_path):
    dest, marker = tmp_path / "pulled", tmp_path / "stopped"
    process = ceres_pull(live_server, token, f"{released.study.code}/release-0001", dest, "--connections", "1",
                         script=[str(HERE / "pull_main.py")], wait=False,
                         env={"CERES_PULL_STOP_AFTER": "5", "CERES_PULL_MARKER": str(marker)})
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), process.communicate(timeout=5)[1] if process.poll() is not None else "no marker"
        finished = marker.read_text().splitlines()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    killed_at = timezone.now()
    assert len(finished) == 5 and all((dest / path).is_file() for path in finished)
    assert not (dest / MANIFEST).exists()  # written last: a folder with a manifest is complete

    result = ceres_pull(live_server, token, f"{released.study.code}/release-0001", dest)
    assert result.returncode == 0, result.stderr
    files = manifest_files(stored_manifest(released))
    assert f"({len(files) - 5} fetched, 5 already in place)" in result.stdout
    second_run = links_issued(released.study, since=killed_at)
    assert not set(finished) & set(second_run)
    assert sorted(second_run) == sorted([MANIFEST, f"{MANIFEST}.sig",
                                         *(f["path"] for f in files if f["path"] not in finished)])


def test_links_that_expired_mid_run_are_asked_for_again(live_server, released, token, tmp_path, monkeypatch):
    """The first links for the files are issued as if ten minutes ago (the portal's and the S3 signer's clocks
    set back): every download is refused once, and ceres-pull asks for a new link and completes."""
    real, calls = links.release_links, []

    def first_batch_expired(user, request, paths=None, *, via, now=None):
        calls.append(list(paths or []))
        if len(calls) != 2:  # call 1: the manifest and its signature; call 2: the first batch of files
            return real(user, request, paths, via=via, now=now)
        signed_at = datetime.now(UTC).replace(tzinfo=None, microsecond=0) - timedelta(minutes=10)
        with monkeypatch.context() as patch:
            patch.setattr(botocore.auth, "get_current_datetime", lambda remove_tzinfo=True: signed_at)
            return real(user, request, paths, via=via, now=timezone.now() - timedelta(minutes=10))

    monkeypatch.setattr(links, "release_links", first_batch_expired)
    result = ceres_pull(live_server, token, f"{released.study.code}/release-0001", tmp_path / "pulled")
    assert result.returncode == 0, result.stderr
    files = [f["path"] for f in manifest_files(stored_manifest(released))]
    issued = links_issued(released.study)
    assert {path: issued.count(path) for path in files} == dict.fromkeys(files, 2)


def test_a_tampered_object_is_reported_and_not_kept(live_server, released, token, tmp_path):
    victim = "episode-000001/meta/info.json"
    name = released.prefix + victim
    data = storages["releases"].open(name).read()
    storage.put(storages["releases"], name, ContentFile(data.replace(b"v3.0", b"v3.9")))
    dest = tmp_path / "pulled"
    result = ceres_pull(live_server, token, f"{released.study.code}/release-0001", dest)
    assert result.returncode == 1
    assert f"problem: {victim}: SHA-256 " in result.stderr and "does not match the manifest; not kept" in result.stderr
    assert not (dest / victim).exists() and not list((dest / ".ceres-pull").rglob("info.json"))
    assert (dest / "episode-000000/meta/info.json").is_file()  # the other files are in place
    assert not (dest / MANIFEST).exists()


def test_a_tampered_manifest_fails_the_signature_check_before_any_file(live_server, released, token, tmp_path):
    name = released.prefix + MANIFEST
    data = bytearray(storages["releases"].open(name).read())
    data[data.index(b"policy training")] ^= 0x01
    storage.put(storages["releases"], name, ContentFile(bytes(data)))
    dest = tmp_path / "pulled"
    result = ceres_pull(live_server, token, f"{released.study.code}/release-0001", dest)
    assert result.returncode == 1
    assert "problem: release-manifest.json.sig: the signature does not match release-manifest.json" in result.stderr
    assert links_issued(released.study) == [MANIFEST, f"{MANIFEST}.sig"]
    assert not [path for path in dest.rglob("*") if path.is_file()]


def test_without_access_nothing_is_pulled(live_server, released, reg, make_researcher, tmp_path):
    from portal.research.models import AccessRequest
    from portal.research.services import access

    user = make_researcher("leaving")
    key = issue_token(user, name="pull")[1]
    access.revoke_access(reg.coordinator, AccessRequest.objects.get(researcher=user), reason="left")
    result = ceres_pull(live_server, key, f"{released.study.code}/release-0001", tmp_path / "pulled")
    assert result.returncode == 3, result.stderr
    assert "refused: links to" in result.stderr and "the portal answered 403" in result.stderr
    assert links_issued(released.study) == []


def test_a_dataset_with_a_hole_is_pulled_and_kept_for_lerobot(live_server, released, researcher, token, tmp_path,
                                                              test_output):
    with scope(study=released.study):
        chosen = [item for item in catalogue.released_items().select_related("request", "episode__recording")
                  .order_by("episode_index") if item.episode_index in (0, 2)]
        dataset, _ = datasets.request_dataset(researcher, released.study, chosen)
        datasets.build_dataset(dataset.pk)
    dest = tmp_path / "dataset"
    result = ceres_pull(live_server, token, f"{released.study.code}/dataset-0001", dest)
    assert result.returncode == 0, result.stderr
    assert json.loads((dest / "meta/info.json").read_text())["total_episodes"] == 2

    # For tests/compat/lerobot_check.sh: the dataset, and what LeRobot must read from it, computed from the
    # stored capture sources and the released shards.
    kept = test_output / "lerobot" / "portal-dataset-hole"
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(dest, kept / "dataset")
    release_dir = kept / "release"  # its shards' mp4s are what LeRobot's decoded frames are compared with
    assert ceres_pull(live_server, token, f"{released.study.code}/release-0001", release_dir).returncode == 0
    captures = []
    with scopes_disabled():
        for item in chosen:
            folder = tmp_path / "captures" / item.folder
            for entry in item.episode.recording.source_files:
                storage.fetch(storages["captures"], entry["path"], folder / entry["name"])
            captures.append(folder)
    expected = subprocess.run([sys.executable, str(REPO / "tests/compat/expectations.py"), "--camera", "32x24",
                               *map(str, captures), "--shards", *(str(release_dir / item.folder) for item in chosen)],
                              cwd=REPO, capture_output=True, text=True, check=True)
    (kept / "expected.json").write_text(expected.stdout)


def test_an_unknown_release_is_named_with_those_that_exist_and_leaves_no_folder(live_server, released, token,
                                                                               tmp_path):
    code = released.study.code
    dest = tmp_path / "new" / "pulled"
    result = ceres_pull(live_server, token, f"{code}/release-0009", dest)
    assert result.returncode == 3, result.stderr
    assert (f"answered 404: release-0009 is not a published release of study {code}; its published releases: "
            f"release-0001") in result.stderr
    assert "No ReleaseRequest matches" not in result.stderr
    assert not dest.exists() and not (tmp_path / "new").exists()  # nothing left behind, not even empty folders

    # A folder that was there before stays, with what it held.
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    assert ceres_pull(live_server, token, f"{code}/release-0009", kept).returncode == 3
    assert [path.name for path in kept.iterdir()] == ["notes.txt"]


def test_an_unpublished_request_reads_like_a_number_never_used(live_server, released, make_request, verified, token,
                                                               tmp_path):
    draft = make_request(verified(1), submit=False)
    assert draft.number == 2
    result = ceres_pull(live_server, token, f"{released.study.code}/release-0002", tmp_path / "pulled")
    assert result.returncode == 3
    assert (f"release-0002 is not a published release of study {released.study.code}; its published releases: "
            f"release-0001\n") in result.stderr
