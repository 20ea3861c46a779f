"""``verify-release`` against a folder or manifest made to slip past it: entries listed twice, extra FIFOs and
empty folders, a manifest or signature that is a FIFO or a link. Each is a named problem (exit 1), never a pass
or a hang."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from exporter.cli import main
from exporter.receipt import RECEIPT
from exporter.release import (
    MANIFEST,
    SIGNATURE,
    ReleaseProblem,
    manifest_bytes,
    public_key_raw,
    release_section,
    section_digest,
    sign,
    verify_release,
)

REPO = Path(__file__).resolve().parents[2]


def _file(root: Path, path: str, content: bytes) -> dict:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return {"path": path, "bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}


def _release(folder: Path, key: Ed25519PrivateKey, *, repeat: str | None = None) -> Path:
    """A signed release of one episode; ``repeat``: a file of the episode listed a second time."""
    shard = folder / "episode-000003"
    files = [_file(shard, "data/chunk-000/file-000.parquet", b"PAR1" + b"\3" * 40),
             _file(shard, "meta/info.json", b'{"codebase_version": "v3.0"}\n'),
             _file(shard, RECEIPT, b'{"episode_index": 3}\n')]
    if repeat is not None:
        files.append(next(dict(item) for item in files if item["path"] == repeat))
    episode = {"episode_index": 3, "episode_id": "capture-3", "files": files, "receipt_sha256": files[2]["sha256"]}
    section = release_section(study="demo", release_id="release-0001", purpose="training",
                              requested_by="coordinator", requested_at="2026-05-04T09:30:00Z", episodes=[episode])
    approvals = [{"officer": name, "approved_at": "2026-05-05T10:00:00Z", "manifest_sha256": section_digest(section)}
                 for name in ("ethics1", "ethics2")]
    data = manifest_bytes(release=section, approvals=approvals, released_at="2026-05-05T10:05:00Z",
                          audit_chain_head={"seq": 41, "hash": "ab" * 32})
    (folder / MANIFEST).write_bytes(data)
    (folder / SIGNATURE).write_bytes(sign(key, data))
    return folder


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def release(tmp_path: Path, key: Ed25519PrivateKey) -> Path:
    folder = _release(tmp_path / "release", key)
    assert verify_release(folder, key.public_key())["release"]["release_id"] == "release-0001"
    return folder


def test_a_file_listed_twice_is_refused(tmp_path, key):
    """The signed manifest lists ``meta/info.json`` twice: the count of files it vouches for is wrong, so the
    manifest is refused, not read as a set."""
    folder = _release(tmp_path / "release", key, repeat="meta/info.json")
    with pytest.raises(ReleaseProblem, match=r"^release-manifest\.json: file path "
                                             r"'episode-000003/meta/info\.json' is listed more than once$"):
        verify_release(folder, key.public_key())


def test_an_extra_fifo_is_named(release, key):
    os.mkfifo(release / "episode-000003" / "meta" / "notes")
    with pytest.raises(ReleaseProblem, match=r"^episode-000003/meta/notes: extra file not in the manifest$"):
        verify_release(release, key.public_key())


def test_an_extra_link_to_a_folder_is_named(release, key, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (release / "more").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ReleaseProblem, match=r"^more: extra file not in the manifest$"):
        verify_release(release, key.public_key())


@pytest.mark.parametrize("folder", ["empty", "episode-000003/data/chunk-001", "episode-000004/meta"])
def test_an_extra_empty_folder_is_named(release, key, folder):
    (release / folder).mkdir(parents=True)
    first = folder.split("/")
    shown = folder if first[0] == "episode-000003" else first[0]  # the outermost folder not in the manifest
    with pytest.raises(ReleaseProblem, match=rf"^{shown}/: extra folder holding no file of the manifest$"):
        verify_release(release, key.public_key())


def _verify_release_process(folder: Path, key: Ed25519PrivateKey) -> subprocess.CompletedProcess:
    """``python -m exporter verify-release`` in its own process; the generous timeout only keeps a hang (the
    failure this guards against) from stopping the suite."""
    import base64

    public = base64.b64encode(public_key_raw(key.public_key())).decode()
    return subprocess.run([sys.executable, "-m", "exporter", "verify-release", str(folder), "--public-key", public],
                          capture_output=True, text=True, check=False, cwd=REPO, timeout=120)


@pytest.mark.parametrize("name", [MANIFEST, SIGNATURE])
def test_a_manifest_or_signature_that_is_a_fifo_is_refused_without_waiting(release, key, name):
    (release / name).unlink()
    os.mkfifo(release / name)
    try:
        done = _verify_release_process(release, key)
    except subprocess.TimeoutExpired:
        pytest.fail(f"verify-release waited on the FIFO {name}")
    assert done.returncode == 1, done.stderr
    assert done.stdout == f"problem: {name}: not a regular file\n"
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", [MANIFEST, SIGNATURE])
def test_a_manifest_or_signature_that_is_a_link_is_refused(release, key, name, tmp_path, capsys):
    """Even a link to the right bytes: what is checked is what is in the folder."""
    (release / name).rename(tmp_path / name)
    (release / name).symlink_to(tmp_path / name)
    public = __import__("base64").b64encode(public_key_raw(key.public_key())).decode()
    assert main(["verify-release", str(release), "--public-key", public]) == 1
    assert capsys.readouterr().out == f"problem: {name}: not a regular file\n"


def test_a_missing_manifest_is_still_named_missing(release, key):
    (release / MANIFEST).unlink()
    with pytest.raises(ReleaseProblem, match=r"^release-manifest\.json: missing from "):
        verify_release(release, key.public_key())


def _signed(folder: Path, key: Ed25519PrivateKey, change) -> Path:
    """The release's manifest changed by ``change`` and signed again with ``key`` (a key the user was handed
    by a hostile portal): the signature holds, the content must still be checked as input."""
    import json

    manifest = json.loads((folder / MANIFEST).read_bytes())
    change(manifest)
    manifest["manifest_sha256"] = section_digest(manifest["release"])
    for approval in manifest["approvals"] if isinstance(manifest["approvals"], list) else []:
        approval["manifest_sha256"] = manifest["manifest_sha256"]
    data = json.dumps(manifest).encode()
    (folder / MANIFEST).write_bytes(data)
    (folder / SIGNATURE).write_bytes(sign(key, data))
    return folder


@pytest.mark.parametrize(("change", "problem"), [
    (lambda m: m["release"]["episodes"][0].update(episode_index="3"), "episode '3' needs a whole episode_index"),
    (lambda m: m["release"]["episodes"][0].update(episode_index=True), "episode True needs a whole episode_index"),
    (lambda m: m["release"].pop("release_id"), "release_id is not a string"),
    (lambda m: m.update(approvals={"officer": "x"}), "approvals is not a list of objects"),
    (lambda m: m["release"]["episodes"][0]["files"][0].update(bytes="44"),
     "file 'episode-000003/ceres/browser-export-receipt.json' needs a whole number of bytes and a sha256"),
    (lambda m: m["release"]["episodes"][0]["files"][0].pop("sha256"), "needs a whole number of bytes and a sha256"),
])
def test_a_signed_manifest_with_wrong_field_types_is_named_not_a_traceback(release, key, capsys, change, problem):
    import base64

    _signed(release, key, change)
    public = base64.b64encode(public_key_raw(key.public_key())).decode()
    assert main(["verify-release", str(release), "--public-key", public]) == 1
    out = capsys.readouterr().out
    assert out.startswith("problem: release-manifest.json: not a release or dataset manifest (") and problem in out
