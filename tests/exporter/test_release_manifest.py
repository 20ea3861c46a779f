"""The release manifest and its Ed25519 signature, checked with ``cryptography``, ``verify-release`` and OpenSSL."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from exporter.cli import main
from exporter.receipt import RECEIPT
from exporter.release import (
    MANIFEST,
    SIGNATURE,
    ReleaseProblem,
    load_public_key,
    manifest_bytes,
    public_key_pem,
    public_key_raw,
    release_section,
    section_digest,
    sign,
    verify_release,
)


def _file(root: Path, path: str, content: bytes) -> dict:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return {"path": path, "bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture
def release(tmp_path: Path, key: Ed25519PrivateKey) -> Path:
    """A release folder of two episodes, signed with ``key``."""
    folder = tmp_path / "release"
    episodes = []
    for index in (3, 7):
        shard = folder / f"episode-{index:06d}"
        files = [_file(shard, "data/chunk-000/file-000.parquet", b"PAR1" + bytes([index]) * 40),
                 _file(shard, "meta/info.json", b'{"codebase_version": "v3.0"}\n'),
                 _file(shard, RECEIPT, f'{{"episode_index": {index}}}\n'.encode())]
        episodes.append({"episode_index": index, "episode_id": f"capture-{index}", "files": files,
                         "receipt_sha256": files[-1]["sha256"]})
    section = release_section(study="demo", release_id="release-0001", purpose="training",
                              requested_by="coordinator", requested_at="2026-05-04T09:30:00Z", episodes=episodes)
    approvals = [{"officer": name, "approved_at": "2026-05-05T10:00:00Z", "manifest_sha256": section_digest(section)}
                 for name in ("ethics1", "ethics2")]
    data = manifest_bytes(release=section, approvals=approvals, released_at="2026-05-05T10:05:00Z",
                          audit_chain_head={"seq": 41, "hash": "ab" * 32})
    (folder / MANIFEST).write_bytes(data)
    (folder / SIGNATURE).write_bytes(sign(key, data))
    return folder


def test_the_signature_verifies_with_the_public_key_alone(release, key):
    data = (release / MANIFEST).read_bytes()
    key.public_key().verify((release / SIGNATURE).read_bytes(), data)  # raises when it does not
    manifest = json.loads(data)
    assert [f["path"] for f in manifest["release"]["episodes"][0]["files"]] == [
        "episode-000003/ceres/browser-export-receipt.json", "episode-000003/data/chunk-000/file-000.parquet",
        "episode-000003/meta/info.json"]
    assert manifest["manifest_sha256"] == section_digest(manifest["release"])
    assert verify_release(release, key.public_key())["release"]["release_id"] == "release-0001"


def test_verify_release_command_accepts_pem_file_and_base64(release, key, tmp_path, capsys):
    pem = tmp_path / "ceres-release-key.pem"
    pem.write_text(public_key_pem(key.public_key()))
    assert main(["verify-release", str(release), "--public-key", str(pem)]) == 0
    assert "release release-0001 of study demo: signature valid" in capsys.readouterr().out
    raw = public_key_raw(load_public_key(pem.read_text()))
    assert main(["verify-release", str(release), "--public-key", base64.b64encode(raw).decode()]) == 0


def test_one_changed_byte_of_the_manifest_is_detected(release, key, capsys):
    path = release / MANIFEST
    data = bytearray(path.read_bytes())
    data[data.index(b"training")] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidSignature):
        key.public_key().verify((release / SIGNATURE).read_bytes(), bytes(data))
    pem = release.parent / "key.pem"
    pem.write_text(public_key_pem(key.public_key()))
    assert main(["verify-release", str(release), "--public-key", str(pem)]) == 1
    assert "release-manifest.json.sig: the signature does not match" in capsys.readouterr().out


def test_one_changed_byte_of_a_released_object_is_detected(release, key, capsys):
    victim = release / "episode-000007" / "data/chunk-000/file-000.parquet"
    data = bytearray(victim.read_bytes())
    data[10] ^= 0x80
    victim.write_bytes(bytes(data))
    pem = release.parent / "key.pem"
    pem.write_text(public_key_pem(key.public_key()))
    assert main(["verify-release", str(release), "--public-key", str(pem)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("problem: episode-000007/data/chunk-000/file-000.parquet: SHA-256 ")


@pytest.mark.parametrize(("change", "problem"), [
    (lambda folder: (folder / "episode-000003/meta/info.json").unlink(), "episode-000003/meta/info.json: missing"),
    (lambda folder: (folder / "episode-000003/extra.txt").write_text("x"),
     "episode-000003/extra.txt: extra file not in the manifest"),
    (lambda folder: (folder / SIGNATURE).unlink(), f"{SIGNATURE}: missing"),
])
def test_missing_and_extra_files_are_named(release, key, change, problem):
    change(release)
    with pytest.raises(ReleaseProblem, match=problem.replace(".", r"\.")):
        verify_release(release, key.public_key())


def test_another_key_does_not_verify(release):
    with pytest.raises(ReleaseProblem, match="signature does not match"):
        verify_release(release, Ed25519PrivateKey.generate().public_key())


def test_a_bad_public_key_is_refused_with_exit_2(release, capsys):
    assert main(["verify-release", str(release), "--public-key", "bm90IGEga2V5"]) == 2
    assert "decodes to 32 bytes, not 9" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_openssl_verifies_the_raw_signature(release, key, tmp_path):
    pem = tmp_path / "key.pem"
    pem.write_text(public_key_pem(key.public_key()))
    result = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(pem), "-rawin",
                             "-in", str(release / MANIFEST), "-sigfile", str(release / SIGNATURE)],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "Signature Verified Successfully" in result.stdout, result.stderr
