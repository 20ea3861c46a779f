"""Signed manifests as a downloader reads them: the one definition of what ``release-manifest.json`` (a release
of episode shards) and ``dataset-manifest.json`` (a one-dataset download) hold, the check of their Ed25519
signatures (``<manifest>.sig``), and the check of a downloaded folder against them.

``ceres-pull`` checks every pull with it, and ``ceres-pull --verify-only FOLDER`` a folder already on disk; the
portal's exporter writes manifests with the same JSON writer and section digest (``exporter/release.py`` builds
and signs them) and its ``python -m exporter verify-release`` is this same check. Nothing here needs more than
the standard library and ``cryptography``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # cryptography is imported where keys are used: hashing and JSON need none of it
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

MANIFEST = "release-manifest.json"
SIGNATURE = "release-manifest.json.sig"
SCHEMA = "ceres-release-manifest"
DATASET_MANIFEST = "dataset-manifest.json"
DATASET_SIGNATURE = "dataset-manifest.json.sig"
DATASET_SCHEMA = "ceres-dataset-manifest"
DATASET_RECEIPT = "ceres/dataset-receipt.json"
# Each episode shard's integrity receipt (shard.md section 9), relative to its folder.
RECEIPT = "ceres/browser-export-receipt.json"
VERSION = 1
_BLOCK = 1 << 20


class ReleaseProblem(Exception):
    """A downloaded release does not verify; the message names the file and what is wrong."""


def json_bytes(value: Any) -> bytes:
    """The one JSON writer of manifests, receipts and metadata: two-space indented UTF-8 (non-ASCII as itself)
    with a final newline, never NaN or Infinity (not JSON; readers differ on them). Key order is the caller's.
    A manifest's digests are taken over these bytes."""
    return (json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def episode_folder(episode_index: int) -> str:
    """Where an episode sits: ``episode-NNNNNN``, the same in a shard's output folder, in storage and in a
    release."""
    return f"episode-{episode_index:06d}"


def stream_digest(stream: IO[bytes], copy_to: IO[bytes] | None = None) -> tuple[str, int]:
    """SHA-256 (lowercase hex) and length in bytes of everything a binary stream holds, read in 1 MiB blocks
    (a local file or a stored object alike); with ``copy_to``, each block is also written there, so copying
    and hashing read each byte once."""
    sha = hashlib.sha256()
    size = 0
    while block := stream.read(_BLOCK):
        sha.update(block)
        if copy_to is not None:
            copy_to.write(block)
        size += len(block)
    return sha.hexdigest(), size


def bytes_digest(data: bytes) -> tuple[str, int]:
    """SHA-256 (lowercase hex) and length in bytes of a byte string held in memory."""
    return hashlib.sha256(data).hexdigest(), len(data)


def file_digest(path: Path, copy_to: Path | None = None) -> tuple[str, int]:
    """SHA-256 (lowercase hex) and length in bytes of one file; with ``copy_to``, the file is copied there (a
    new file) as it is read."""
    with Path(path).open("rb") as stream:
        if copy_to is None:
            return stream_digest(stream)
        with copy_to.open("xb") as out:
            return stream_digest(stream, out)


def section_digest(release: dict[str, Any]) -> str:
    """The SHA-256 an approval records: of the ``release`` section as the one JSON writer writes it."""
    return bytes_digest(json_bytes(release))[0]


def manifest_files(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every file of the release or dataset the manifest lists (not the manifest and its signature), in order:
    the section's files, then the dataset card and metadata files at the root (``card_files``; absent in
    manifests signed before they existed)."""
    cards = list(manifest.get("card_files") or [])
    if manifest.get("schema") == DATASET_SCHEMA:
        return list(manifest["dataset"]["files"]) + cards
    return [item for episode in released_episodes(manifest) for item in episode["files"]] + cards


def released_episodes(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The episodes of a release as published: the approved section's, except those published as a derived
    (redacted) shard (``redacted_episodes``, absent in manifests without one), whose entry replaces them: its
    ``receipt_sha256`` and ``files`` are the derived shard's, ``original_receipt_sha256`` the approved one's."""
    redacted = {entry.get("episode_index"): entry for entry in manifest.get("redacted_episodes") or []
                if isinstance(entry, dict)}
    return [redacted.get(episode["episode_index"], episode) for episode in manifest["release"]["episodes"]]



# --- keys ------------------------------------------------------------------------------------------


def public_key_pem(public_key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.PEM,
                                   serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def public_key_raw(public_key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """SHA-256 of the raw 32-byte public key, hex: short enough to read out, long enough to compare."""
    return bytes_digest(public_key_raw(public_key))[0]


def load_public_key(key: str) -> Ed25519PublicKey:
    """A public key given as a PEM file's path, PEM text, or base64 of the raw 32 bytes."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

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
    from cryptography.exceptions import InvalidSignature

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
        _check_redacted(manifest, episodes)
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


def _check_redacted(manifest: dict[str, Any], episodes: list[dict[str, Any]]) -> None:
    """``redacted_episodes`` (optional): each names an episode of the section once, by the receipt the officers
    approved (``original_receipt_sha256``), with its own ``receipt_sha256``, ``files`` and ``redaction``."""
    redacted = manifest.get("redacted_episodes", [])
    if not isinstance(redacted, list) or not all(isinstance(entry, dict) for entry in redacted):
        raise ValueError("redacted_episodes is not a list of objects")
    approved = {episode["episode_index"]: episode["receipt_sha256"] for episode in episodes}
    seen = set()
    for entry in redacted:
        index = entry.get("episode_index")
        if type(index) is not int or index not in approved or index in seen:
            raise ValueError(f"redacted episode {index!r} is not an episode of the release named once")
        seen.add(index)
        if entry.get("original_receipt_sha256") != approved[index]:
            raise ValueError(f"redacted episode {index}: its original_receipt_sha256 is not the approved receipt")
        if not isinstance(entry.get("receipt_sha256"), str) or not isinstance(entry.get("files"), list) \
                or not isinstance(entry.get("redaction"), dict):
            raise ValueError(f"redacted episode {index} needs a receipt_sha256, files and a redaction")
        folder = f"{episode_folder(index)}/"
        if not all(isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"].startswith(folder)
                   for item in entry["files"]):
            raise ValueError(f"redacted episode {index}: a file is not in its folder {folder}")
    if manifest["release"].get("face_policy") == "redact":
        # The approved policy: every episode with a video is published redacted, never its original video.
        for episode in episodes:
            if episode["episode_index"] not in seen and any(
                    isinstance(item, dict) and str(item.get("path", "")).endswith(".mp4") for item in episode["files"]):
                raise ValueError(f"episode {episode['episode_index']} has a video but no redacted shard, and the "
                                 f"release was approved under the redact face policy")


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
    for episode in released_episodes(manifest):
        receipt = listed.get(f"{episode_folder(episode['episode_index'])}/{RECEIPT}")
        if receipt is None or receipt["sha256"] != episode["receipt_sha256"]:
            raise ReleaseProblem(f"{episode_folder(episode['episode_index'])}: its receipt's SHA-256 is not the "
                                 f"receipt_sha256 the manifest names")


def summary(manifest: dict[str, Any], public_key: Ed25519PublicKey) -> list[str]:
    """The lines a verified folder is reported with (``verify-release`` and ``ceres-pull --verify-only``): what
    it is, the key, the counts, and for a superseding release what it supersedes and the approvals it carries."""
    if manifest.get("schema") == DATASET_SCHEMA:
        dataset = manifest["dataset"]
        return [f"dataset {dataset['dataset_id']} of study {dataset['study']}: signature valid "
                f"(key {fingerprint(public_key)}), {len(dataset['episodes'])} episodes, "
                f"{len(manifest_files(manifest))} files match the manifest"]
    release = manifest["release"]
    lines = [f"release {release['release_id']} of study {release['study']}: signature valid "
             f"(key {fingerprint(public_key)}), {len(release['episodes'])} episodes, "
             f"{len(manifest_files(manifest))} files match the manifest, "
             f"{len(manifest['approvals'])} approvals"]
    named = superseding(manifest)
    if named is not None:
        digest = f" (manifest {named['manifest_sha256']})" if named.get("manifest_sha256") else ""
        withdrawal = f", made by withdrawal {named['withdrawal']}" if named.get("withdrawal") is not None else ""
        lines.append(f"supersedes {named.get('release_id')}{digest}{withdrawal}")
        lines += [f"carries the approval of {approval['officer']} at {approval['approved_at']} of "
                  f"{approval['manifest_sha256']}" for approval in named["carried_approvals"]]
    redacted = manifest.get("redacted_episodes") or []
    if redacted:
        lines.append(f"{len(redacted)} episode(s) published with bystanders' faces redacted (derived shards; "
                     f"the approved originals' receipts are named beside them)")
    return lines
