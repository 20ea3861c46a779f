"""Release manifests: the one definition of ``release-manifest.json``, its Ed25519 signature
``release-manifest.json.sig``, and the check of a downloaded release folder against both.

The portal builds manifests through ``release_section`` and ``manifest_bytes`` and signs them with ``sign``;
``python -m exporter verify-release FOLDER --public-key KEY`` checks them with nothing but the public key.
The format is written down in the project's docs (``docs/releases.md``).
"""

import base64
import binascii
import hashlib
import json
from pathlib import Path, PurePosixPath
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from exporter.jsonfile import json_bytes
from exporter.receipt import RECEIPT, file_digest, folder_files

MANIFEST = "release-manifest.json"
SIGNATURE = "release-manifest.json.sig"
SCHEMA = "ceres-release-manifest"
VERSION = 1


class ReleaseProblem(Exception):
    """A downloaded release does not verify; the message names the file and what is wrong."""


def episode_folder(episode_index: int) -> str:
    return f"episode-{episode_index:06d}"


def release_section(*, study: str, release_id: str, purpose: str, requested_by: str, requested_at: str,
                    episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """What ethics officers are shown and approve. ``episodes``: ``episode_index``, ``episode_id``,
    ``receipt_sha256`` and ``files`` (the shard's files, receipt included: ``path`` relative to the shard,
    ``bytes``, ``sha256``). File paths become relative to the release folder."""
    return {
        "study": study,
        "release_id": release_id,
        "purpose": purpose,
        "requested_by": requested_by,
        "requested_at": requested_at,
        "episodes": [
            {
                "episode_index": episode["episode_index"],
                "episode_id": episode["episode_id"],
                "receipt_sha256": episode["receipt_sha256"],
                "files": [
                    {"path": f"{episode_folder(episode['episode_index'])}/{item['path']}", "bytes": item["bytes"],
                     "sha256": item["sha256"]}
                    for item in sorted(episode["files"], key=lambda item: item["path"])
                ],
            }
            for episode in sorted(episodes, key=lambda episode: episode["episode_index"])
        ],
    }


def section_digest(release: dict[str, Any]) -> str:
    """The SHA-256 an approval records: of the ``release`` section as the one JSON writer writes it."""
    return hashlib.sha256(json_bytes(release)).hexdigest()


def manifest_bytes(*, release: dict[str, Any], approvals: list[dict[str, Any]], released_at: str,
                   audit_chain_head: dict[str, Any]) -> bytes:
    """The manifest's exact bytes (what the signature covers). ``approvals``: ``officer``, ``approved_at``,
    ``manifest_sha256`` (the ``release`` section's digest the officer was shown)."""
    return json_bytes({
        "schema": SCHEMA,
        "version": VERSION,
        "release": release,
        "manifest_sha256": section_digest(release),
        "approvals": approvals,
        "released_at": released_at,
        "audit_chain_head": audit_chain_head,
    })


def manifest_files(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every file of the release the manifest lists (not the manifest and its signature), in order."""
    return [item for episode in manifest["release"]["episodes"] for item in episode["files"]]


# --- keys and signatures --------------------------------------------------------------------------


def private_key_from_seed(seed: bytes) -> Ed25519PrivateKey:
    if len(seed) != 32:
        raise ValueError(f"an Ed25519 private key is 32 bytes, not {len(seed)}")
    return Ed25519PrivateKey.from_private_bytes(seed)


def sign(private_key: Ed25519PrivateKey, data: bytes) -> bytes:
    """The raw 64-byte Ed25519 signature of ``data`` (what ``release-manifest.json.sig`` holds)."""
    return private_key.sign(data)


def public_key_pem(public_key: Ed25519PublicKey) -> str:
    return public_key.public_bytes(serialization.Encoding.PEM,
                                   serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def public_key_raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """SHA-256 of the raw 32-byte public key, hex: short enough to read out, long enough to compare."""
    return hashlib.sha256(public_key_raw(public_key)).hexdigest()


def load_public_key(key: str) -> Ed25519PublicKey:
    """A public key given as a PEM file's path, PEM text, or base64 of the raw 32 bytes."""
    text = key.strip()
    path = Path(text)
    if "BEGIN" not in text and len(text) < 4096 and path.is_file():
        text = path.read_text(encoding="ascii").strip()
    if "BEGIN PUBLIC KEY" in text:
        loaded = serialization.load_pem_public_key(text.encode("ascii"))
        if not isinstance(loaded, Ed25519PublicKey):
            raise ValueError("the PEM public key is not an Ed25519 key")
        return loaded
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ValueError("the public key is neither a PEM file, PEM text nor base64 of 32 bytes") from None
    if len(raw) != 32:
        raise ValueError(f"a base64 Ed25519 public key decodes to 32 bytes, not {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


# --- verification of a downloaded release ---------------------------------------------------------


def _safe_path(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ReleaseProblem(f"{MANIFEST}: a file path is not a non-empty string: {name!r}")
    parts = PurePosixPath(name).parts
    if name.startswith("/") or "\\" in name or any(part in ("..", ".") for part in parts):
        raise ReleaseProblem(f"{MANIFEST}: file path {name!r} leaves the release folder")
    return name


def verify_release(folder: Path, public_key: Ed25519PublicKey) -> dict[str, Any]:
    """Check a release folder: the signature over the manifest's exact bytes, the approvals' digests, and
    every file (the set of files, each length and SHA-256, each episode's receipt digest). Returns the
    manifest; raises ``ReleaseProblem`` naming the first problem."""
    folder = Path(folder)
    try:
        data = (folder / MANIFEST).read_bytes()
    except OSError:
        raise ReleaseProblem(f"{MANIFEST}: missing from {folder}") from None
    try:
        signature = (folder / SIGNATURE).read_bytes()
    except OSError:
        raise ReleaseProblem(f"{SIGNATURE}: missing from {folder}") from None
    try:
        public_key.verify(signature, data)
    except InvalidSignature:
        raise ReleaseProblem(f"{SIGNATURE}: the signature does not match {MANIFEST} and this public key "
                             f"(fingerprint {fingerprint(public_key)})") from None
    try:
        manifest = json.loads(data)
        if manifest.get("schema") != SCHEMA or manifest.get("version") != VERSION:
            raise ValueError(f"schema {manifest.get('schema')!r} version {manifest.get('version')!r}, "
                             f"expected {SCHEMA!r} version {VERSION}")
        shown = section_digest(manifest["release"])
        files = manifest_files(manifest)
        approvals = manifest["approvals"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReleaseProblem(f"{MANIFEST}: not a release manifest ({exc})") from None
    if manifest.get("manifest_sha256") != shown:
        raise ReleaseProblem(f"{MANIFEST}: manifest_sha256 does not match its release section")
    for approval in approvals:
        if approval.get("manifest_sha256") != shown:
            raise ReleaseProblem(f"{MANIFEST}: the approval of {approval.get('officer')!r} names another "
                                 f"manifest ({approval.get('manifest_sha256')})")
    listed = {_safe_path(item.get("path")): item for item in files}
    present = set(folder_files(folder)) - {MANIFEST, SIGNATURE}
    for name in sorted(listed):
        path = folder / name
        if name not in present:
            raise ReleaseProblem(f"{name}: missing")
        if path.is_symlink() or not path.is_file():
            raise ReleaseProblem(f"{name}: not a regular file")
        sha256, size = file_digest(path)
        if size != listed[name].get("bytes"):
            raise ReleaseProblem(f"{name}: {size} bytes, the manifest says {listed[name].get('bytes')}")
        if sha256 != listed[name].get("sha256"):
            raise ReleaseProblem(f"{name}: SHA-256 {sha256} does not match the manifest")
    extra = sorted(present - listed.keys())
    if extra:
        raise ReleaseProblem(f"{extra[0]}: extra file not in the manifest")
    for episode in manifest["release"]["episodes"]:
        receipt = listed.get(f"{episode_folder(episode['episode_index'])}/{RECEIPT}")
        if receipt is None or receipt["sha256"] != episode["receipt_sha256"]:
            raise ReleaseProblem(f"{episode_folder(episode['episode_index'])}: its receipt's SHA-256 is not the "
                                 f"receipt_sha256 the manifest names")
    return manifest
