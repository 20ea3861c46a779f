"""Signed manifests: the one definition of ``release-manifest.json`` (a release of episode shards) and of
``dataset-manifest.json`` (a one-dataset download: released episodes assembled as one LeRobot dataset), their
Ed25519 signatures (``<manifest>.sig``), and the check of a downloaded folder against both.

The portal builds manifests through ``release_section``/``manifest_bytes`` and ``dataset_section``/
``dataset_manifest_bytes`` and signs them with ``sign``; ``python -m exporter verify-release FOLDER --public-key
KEY`` checks either kind with nothing but the public key. The formats are written down in the project's docs
(``docs/releases.md``, ``docs/research.md``).
"""

import base64
import binascii
import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from exporter.jsonfile import json_bytes
from exporter.layout import episode_folder
from exporter.receipt import RECEIPT, bytes_digest, file_digest

MANIFEST = "release-manifest.json"
SIGNATURE = "release-manifest.json.sig"
SCHEMA = "ceres-release-manifest"
DATASET_MANIFEST = "dataset-manifest.json"
DATASET_SIGNATURE = "dataset-manifest.json.sig"
DATASET_SCHEMA = "ceres-dataset-manifest"
DATASET_RECEIPT = "ceres/dataset-receipt.json"
VERSION = 1


class ReleaseProblem(Exception):
    """A downloaded release does not verify; the message names the file and what is wrong."""


def release_section(*, study: str, release_id: str, purpose: str, requested_by: str, requested_at: str,
                    episodes: list[dict[str, Any]], supersedes: str | dict[str, Any] | None = None,
                    withdrawal: int | None = None, carried_approvals: list[dict[str, Any]] | None = None) \
        -> dict[str, Any]:
    """What ethics officers are shown and approve. ``episodes``: ``episode_index``, ``episode_id``,
    ``receipt_sha256`` and ``files`` (the shard's files, receipt included: ``path`` relative to the shard,
    ``bytes``, ``sha256``). File paths become relative to the release folder. ``supersedes``: the release this
    one replaces after a withdrawal (absent otherwise, so other manifests keep their bytes): its ``release_id``,
    ``number`` and ``manifest_sha256`` (a bare release id in releases made before they were named). ``withdrawal``:
    the id of the withdrawal that made it; ``carried_approvals``: the superseded release's approvals it carries
    (``officer``, ``approved_at``, ``manifest_sha256``), when it carries them instead of being approved again."""
    section = {
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
    if supersedes is not None:
        section["supersedes"] = supersedes
    if withdrawal is not None:
        section["withdrawal"] = withdrawal
    if carried_approvals:
        section["carried_approvals"] = [
            {"officer": a["officer"], "approved_at": a["approved_at"], "manifest_sha256": a["manifest_sha256"]}
            for a in sorted(carried_approvals, key=lambda a: (a["approved_at"], a["officer"]))]
    return section


def section_digest(release: dict[str, Any]) -> str:
    """The SHA-256 an approval records: of the ``release`` section as the one JSON writer writes it."""
    return bytes_digest(json_bytes(release))[0]


def manifest_bytes(*, release: dict[str, Any], approvals: list[dict[str, Any]], released_at: str,
                   audit_chain_head: dict[str, Any], card_files: list[dict[str, Any]] | None = None) -> bytes:
    """The manifest's exact bytes (what the signature covers). ``approvals``: ``officer``, ``approved_at``,
    ``manifest_sha256`` (the ``release`` section's digest the officer was shown). ``card_files``: the dataset
    card and metadata at the release's root (``card_entries``), written when it is published: outside the
    approved section, covered by the signature like every file (absent in releases made before them)."""
    manifest = {
        "schema": SCHEMA,
        "version": VERSION,
        "release": release,
        "manifest_sha256": section_digest(release),
        "approvals": approvals,
        "released_at": released_at,
        "audit_chain_head": audit_chain_head,
    }
    if card_files is not None:
        manifest["card_files"] = card_files
    return json_bytes(manifest)


def card_entries(files: dict[str, bytes]) -> list[dict[str, Any]]:
    """The manifest's ``card_files``: each card or metadata file at the root (``path``, ``bytes``, ``sha256``)."""
    return [{"path": name, "bytes": len(data), "sha256": bytes_digest(data)[0]} for name, data in sorted(files.items())]


def manifest_files(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every file of the release or dataset the manifest lists (not the manifest and its signature), in order:
    the section's files, then the card and metadata files at the root."""
    cards = list(manifest.get("card_files") or [])
    if manifest.get("schema") == DATASET_SCHEMA:
        return list(manifest["dataset"]["files"]) + cards
    return [item for episode in manifest["release"]["episodes"] for item in episode["files"]] + cards


TOMBSTONE_SCHEMA = "ceres-release-tombstone"


def tombstone_bytes(*, study: str, release_id: str | None, dataset_id: str | None, episodes_removed: list[int],
                    removed_at: str, reason: str, superseded_by: str | None) -> bytes:
    """A tombstone's exact bytes: which study episode indexes left a release (or that a dataset was removed),
    when, why, and the release that replaces it. Content-free by construction: no designator, no headset, no
    value of the episodes."""
    return json_bytes({
        "schema": TOMBSTONE_SCHEMA,
        "version": VERSION,
        "study": study,
        "release_id": release_id,
        "dataset_id": dataset_id,
        "episodes_removed": sorted(episodes_removed),
        "removed_at": removed_at,
        "reason": reason,
        "superseded_by": superseded_by,
    })


def dataset_section(*, study: str, dataset_id: str, created_at: str, episodes: list[dict[str, Any]],
                    files: list[dict[str, Any]], dataset_receipt_sha256: str) -> dict[str, Any]:
    """What a one-dataset download holds. ``episodes``: ``episode_index`` (in the dataset), ``episode_id``,
    ``source_release``, ``source_episode_index`` and ``source_receipt_sha256``; ``files``: every file of the
    assembled dataset (``path`` relative to its folder, ``bytes``, ``sha256``), its receipt included."""
    return {
        "study": study,
        "dataset_id": dataset_id,
        "created_at": created_at,
        "episodes": sorted(({key: episode[key] for key in ("episode_index", "episode_id", "source_release",
                                                            "source_episode_index", "source_receipt_sha256")}
                            for episode in episodes), key=lambda episode: episode["episode_index"]),
        "files": [{"path": item["path"], "bytes": item["bytes"], "sha256": item["sha256"]}
                  for item in sorted(files, key=lambda item: item["path"])],
        "dataset_receipt_sha256": dataset_receipt_sha256,
    }


def dataset_manifest_bytes(*, dataset: dict[str, Any], signed_at: str, audit_chain_head: dict[str, Any],
                           card_files: list[dict[str, Any]] | None = None) -> bytes:
    """The dataset manifest's exact bytes (what its signature covers); ``card_files`` as in ``manifest_bytes``."""
    manifest = {
        "schema": DATASET_SCHEMA,
        "version": VERSION,
        "dataset": dataset,
        "manifest_sha256": section_digest(dataset),
        "signed_at": signed_at,
        "audit_chain_head": audit_chain_head,
    }
    if card_files is not None:
        manifest["card_files"] = card_files
    return json_bytes(manifest)


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
    return bytes_digest(public_key_raw(public_key))[0]


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


def verify_release(folder: Path, public_key: Ed25519PublicKey) -> dict[str, Any]:
    """Check a downloaded release or dataset folder: the signature over the manifest's exact bytes, and every
    file (the set of files, each length and SHA-256; each episode's receipt digest, or the dataset receipt's).
    For a release also that every approval names the manifest's digest. Returns the manifest; raises
    ``ReleaseProblem`` naming the first problem."""
    folder = Path(folder)
    kind = DATASET_MANIFEST if (folder / DATASET_MANIFEST).exists() and not (folder / MANIFEST).exists() \
        else MANIFEST
    manifest = read_signed_manifest(folder / kind, public_key)
    check_files(folder, manifest)
    return manifest


def read_signed_manifest(path: Path, public_key: Ed25519PublicKey, *, signature: bytes | None = None) \
        -> dict[str, Any]:
    """The manifest at ``path`` once its signature (``<path>.sig``, or ``signature``) checks with ``public_key``
    and its own digests agree; ``ReleaseProblem`` otherwise."""
    path = Path(path)
    data = _read_regular(path)
    if signature is None:
        signature = _read_regular(path.with_name(f"{path.name}.sig"))
    return parse_signed_manifest(data, signature, public_key, name=path.name)


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file, opened without following a link and without blocking (a FIFO in its place
    would otherwise wait for a writer forever); ``ReleaseProblem`` naming it when it is missing or not a
    regular file."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ReleaseProblem(f"{path.name}: missing from {path.parent}") from None
    except OSError:
        raise ReleaseProblem(f"{path.name}: not a regular file") from None
    with os.fdopen(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise ReleaseProblem(f"{path.name}: not a regular file")
        return stream.read()


def read_manifest(data: bytes) -> dict[str, Any]:
    """A manifest's bytes (a release's or a dataset's) as the object they hold, its schema and version checked;
    ``ValueError`` otherwise (``json.JSONDecodeError`` for bytes that are not JSON). The signature is not checked
    here: ``parse_signed_manifest`` does, for a manifest that comes from elsewhere."""
    manifest = json.loads(data)
    if not isinstance(manifest, dict):
        raise ValueError(f"a manifest is a JSON object, not {type(manifest).__name__}")
    schema = manifest.get("schema")
    if schema not in (SCHEMA, DATASET_SCHEMA) or manifest.get("version") != VERSION:
        raise ValueError(f"schema {schema!r} version {manifest.get('version')!r}, expected {SCHEMA!r} or "
                         f"{DATASET_SCHEMA!r} version {VERSION}")
    return manifest


def parse_signed_manifest(data: bytes, signature: bytes, public_key: Ed25519PublicKey, *,
                          name: str = MANIFEST) -> dict[str, Any]:
    """Check ``signature`` over ``data`` and parse the manifest (a release's or a dataset's)."""
    try:
        public_key.verify(signature, data)
    except InvalidSignature:
        raise ReleaseProblem(f"{name}.sig: the signature does not match {name} and this public key "
                             f"(fingerprint {fingerprint(public_key)})") from None
    try:
        manifest = read_manifest(data)
        schema = manifest["schema"]
        section = manifest["release" if schema == SCHEMA else "dataset"]
        _check_fields(manifest, schema)
        shown = section_digest(section)
        files = manifest_files(manifest)
        approvals = manifest["approvals"] if schema == SCHEMA else []
        seen = set()
        for item in files:
            path = _safe_path(item.get("path"), name)
            if path in seen:
                raise ReleaseProblem(f"{name}: file path {path!r} is listed more than once")
            seen.add(path)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReleaseProblem(f"{name}: not a release or dataset manifest ({exc})") from None
    if manifest.get("manifest_sha256") != shown:
        kind = "release" if schema == SCHEMA else "dataset"
        raise ReleaseProblem(f"{name}: manifest_sha256 does not match its {kind} section")
    carried = _carried(manifest, name) if schema == SCHEMA else []
    for approval in approvals:
        if approval.get("carried_over_from") is not None:
            if {key: approval.get(key) for key in ("officer", "approved_at", "manifest_sha256")} not in carried:
                raise ReleaseProblem(f"{name}: the approval of {approval.get('officer')!r} carried over from "
                                     f"{approval.get('carried_over_from')!r} is not one the release section "
                                     f"names as carried")
            continue
        if approval.get("manifest_sha256") != shown:
            raise ReleaseProblem(f"{name}: the approval of {approval.get('officer')!r} names another "
                                 f"manifest ({approval.get('manifest_sha256')})")
    return manifest


def superseding(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """What a superseding release's manifest names: the release it supersedes (``release_id``, ``number``,
    ``manifest_sha256``; only ``release_id`` in releases made before they were named), the ``withdrawal`` and the
    ``carried_approvals``; None for any other manifest."""
    section = manifest.get("release") if manifest.get("schema") == SCHEMA else None
    if not section or section.get("supersedes") is None:
        return None
    supersedes = section["supersedes"]
    named = dict(supersedes) if isinstance(supersedes, dict) else {"release_id": supersedes}
    return {**named, "withdrawal": section.get("withdrawal"), "carried_approvals": section.get("carried_approvals",
                                                                                                [])}


def _carried(manifest: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The approvals a superseding release's section names as carried, once checked: each names the superseded
    release's manifest digest, and the carried approvals in ``approvals`` are exactly those."""
    section = manifest["release"]
    carried = section.get("carried_approvals")
    if carried is None:
        return []
    supersedes = section.get("supersedes")
    if not isinstance(carried, list) or not carried or not isinstance(supersedes, dict) \
            or not isinstance(supersedes.get("manifest_sha256"), str) or type(supersedes.get("number")) is not int \
            or type(section.get("withdrawal")) is not int:
        raise ReleaseProblem(f"{name}: carried_approvals needs the release it supersedes (number and "
                             f"manifest_sha256) and the withdrawal that made it")
    for approval in carried:
        if not isinstance(approval, dict) or approval.get("manifest_sha256") != supersedes["manifest_sha256"]:
            shown = approval.get("officer") if isinstance(approval, dict) else approval
            raise ReleaseProblem(f"{name}: the carried approval of {shown!r} does not name the manifest of "
                                 f"{supersedes.get('release_id')!r} ({supersedes['manifest_sha256']})")
    listed = [{key: a.get(key) for key in ("officer", "approved_at", "manifest_sha256")}
              for a in manifest["approvals"] if a.get("carried_over_from") is not None]
    if sorted(map(json_bytes, listed)) != sorted(map(json_bytes, carried)):
        raise ReleaseProblem(f"{name}: the approvals carried over are not the carried_approvals the release "
                             f"section names")
    return carried


def _check_fields(manifest: dict[str, Any], schema: str) -> None:
    """The fields verification and ``verify-release``'s summary read, with their types: a manifest signed by
    a key someone was handed is still hostile input. ``ValueError`` naming the first wrong one."""
    section = manifest["release" if schema == SCHEMA else "dataset"]
    for field in ("study", "release_id" if schema == SCHEMA else "dataset_id"):
        if not isinstance(section.get(field), str):
            raise ValueError(f"{field} is not a string")
    episodes = section.get("episodes")
    if not isinstance(episodes, list) or not all(isinstance(episode, dict) for episode in episodes):
        raise ValueError("episodes is not a list of objects")
    if schema == SCHEMA:
        approvals = manifest.get("approvals")
        if not isinstance(approvals, list) or not all(isinstance(approval, dict) for approval in approvals):
            raise ValueError("approvals is not a list of objects")
        for episode in episodes:
            index = episode.get("episode_index")
            if type(index) is not int or index < 0 or not isinstance(episode.get("receipt_sha256"), str) \
                    or not isinstance(episode.get("files"), list):
                raise ValueError(f"episode {index!r} needs a whole episode_index, a receipt_sha256 and files")
    elif not isinstance(section.get("files"), list) or not isinstance(section.get("dataset_receipt_sha256"), str):
        raise ValueError("the dataset needs files and a dataset_receipt_sha256")
    cards = manifest.get("card_files", [])
    if not isinstance(cards, list) or not all(isinstance(item, dict) for item in cards):
        raise ValueError("card_files is not a list of objects")
    for item in manifest_files(manifest):
        size = item.get("bytes") if isinstance(item, dict) else None
        if type(size) is not int or size < 0 or not isinstance(item.get("sha256"), str):
            shown = item.get("path") if isinstance(item, dict) else item
            raise ValueError(f"file {shown!r} needs a whole number of bytes and a sha256")


def _safe_path(name: Any, manifest: str = MANIFEST) -> str:
    if not isinstance(name, str) or not name:
        raise ReleaseProblem(f"{manifest}: a file path is not a non-empty string: {name!r}")
    parts = PurePosixPath(name).parts
    if name.startswith("/") or "\\" in name or any(part in ("..", ".") for part in parts) \
            or name in (MANIFEST, SIGNATURE, DATASET_MANIFEST, DATASET_SIGNATURE):
        raise ReleaseProblem(f"{manifest}: file path {name!r} leaves the folder or names a manifest")
    return name


def _folder_entries(root: Path) -> tuple[set[str], set[str]]:
    """Every entry under ``root`` as relative ``/``-separated paths, links never followed: what is not a folder
    (regular files, links, FIFOs, sockets, devices), and the folders."""
    others: set[str] = set()
    folders: set[str] = set()
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                name = f"{prefix}{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    folders.add(name)
                    pending.append((Path(entry.path), f"{name}/"))
                else:
                    others.add(name)
    return others, folders


def check_file(path: Path, entry: dict[str, Any]) -> str | None:
    """What is wrong with the file at ``path`` against its manifest ``entry``, or None when it matches."""
    if path.is_symlink() or not path.is_file():
        return "not a regular file"
    sha256, size = file_digest(path)
    if size != entry.get("bytes"):
        return f"{size} bytes, the manifest says {entry.get('bytes')}"
    if sha256 != entry.get("sha256"):
        return f"SHA-256 {sha256} does not match the manifest"
    return None


def check_files(folder: Path, manifest: dict[str, Any]) -> None:
    """Every file the manifest lists is in ``folder`` with its length and SHA-256, nothing else is, and the
    receipts are the ones the manifest names; ``ReleaseProblem`` naming the first problem."""
    dataset = manifest.get("schema") == DATASET_SCHEMA
    own = {DATASET_MANIFEST, DATASET_SIGNATURE} if dataset else {MANIFEST, SIGNATURE}
    listed = {item["path"]: item for item in manifest_files(manifest)}
    present, folders = _folder_entries(folder)
    present -= own
    for name in sorted(listed):
        if name not in present:
            raise ReleaseProblem(f"{name}: missing")
        problem = check_file(folder / name, listed[name])
        if problem:
            raise ReleaseProblem(f"{name}: {problem}")
    extra = sorted(present - listed.keys())
    if extra:
        raise ReleaseProblem(f"{extra[0]}: extra file not in the manifest")
    needed = {str(parent) for name in listed for parent in PurePosixPath(name).parents if str(parent) != "."}
    empty = sorted(folders - needed)
    if empty:
        raise ReleaseProblem(f"{empty[0]}/: extra folder holding no file of the manifest")
    if dataset:
        receipt = listed.get(DATASET_RECEIPT)
        if receipt is None or receipt["sha256"] != manifest["dataset"]["dataset_receipt_sha256"]:
            raise ReleaseProblem(f"{DATASET_RECEIPT}: its SHA-256 is not the dataset_receipt_sha256 the manifest "
                                 f"names")
        return
    for episode in manifest["release"]["episodes"]:
        receipt = listed.get(f"{episode_folder(episode['episode_index'])}/{RECEIPT}")
        if receipt is None or receipt["sha256"] != episode["receipt_sha256"]:
            raise ReleaseProblem(f"{episode_folder(episode['episode_index'])}: its receipt's SHA-256 is not the "
                                 f"receipt_sha256 the manifest names")
