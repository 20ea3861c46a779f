"""Integrity receipts (shard.md sections 9 and 10): the artefact list of a folder and its verification.

One implementation serves the episode shard's ``ceres/browser-export-receipt.json`` and the assembled
dataset's ``ceres/dataset-receipt.json``.
"""

import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ceres_pull.manifest import RECEIPT, bytes_digest, file_digest, stream_digest  # noqa: F401  (shared)

from exporter.jsonfile import json_bytes

MEDIA_TYPES = {".parquet": "application/vnd.apache.parquet", ".json": "application/json", ".mp4": "video/mp4"}
# hashlib releases the GIL while it digests, so a few threads hash the video and the data parquet at once.
_HASH_THREADS = min(4, os.cpu_count() or 1)
_BLOCK = 1 << 20
_THREADED_BYTES = 16 << 20


def _digests(root: Path, names: Iterable[str], copies: Mapping[str, Path] | None = None) -> list[tuple[str, int]]:
    copies = copies or {}
    names = list(names)

    def digest(name: str) -> tuple[str, int]:
        return file_digest(root / name, copies.get(name))

    if len(names) < 2 or sum((root / name).stat().st_size for name in names) < _THREADED_BYTES:
        return [digest(name) for name in names]  # starting threads would cost more than they save
    with ThreadPoolExecutor(max_workers=_HASH_THREADS) as pool:
        return list(pool.map(digest, names))


def folder_files(root: Path) -> list[str]:
    """Relative ``/``-separated paths of every file (and symlink) under ``root``, sorted."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink())


def build_artefacts(
    root: Path, *, exclude: str, known: Mapping[str, tuple[str, int]] | None = None
) -> list[dict[str, Any]]:
    """Receipt entries for every file under ``root`` except ``exclude`` (the receipt itself), by path.
    ``known`` gives digests and sizes already taken while the files were written; others are hashed."""
    known = known or {}
    names = [name for name in folder_files(root) if name != exclude]
    unknown = [name for name in names if name not in known]
    digests = {**known, **dict(zip(unknown, _digests(root, unknown), strict=True))}
    return [
        {"path": n, "sha256": digests[n][0], "bytes": digests[n][1], "media_type": MEDIA_TYPES[Path(n).suffix]}
        for n in names
    ]


def verify_artefacts(root: Path, receipt_name: str) -> list[str]:
    """Problems found (empty when the files under ``root`` are exactly the receipt's artefacts, with
    matching digests and sizes); ``receipt_name`` is the receipt's path relative to ``root``."""
    return check_artefacts(root, receipt_name)[0]


def read_artefacts(data: bytes) -> dict[str, dict[str, Any]]:
    """A receipt's artefacts by path, in the receipt's order, from the receipt's bytes; ``ValueError`` saying
    what is wrong when they are not a receipt."""
    try:
        receipt: Any = json.loads(data)
        artefacts = {a["path"]: a for a in receipt["artefacts"]}
        if not all(isinstance(name, str) for name in artefacts):
            raise TypeError("an artefact path is not a string")
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"unreadable receipt: {exc}") from None
    return artefacts


def listing_problems(
    artefacts: Mapping[str, Any], present: Iterable[str], *, names: Iterable[str] | None = None, noun: str = "file"
) -> list[str]:
    """What the receipt's list and the names held beside it (``present``, the receipt aside) disagree on: a
    held ``noun`` the receipt does not list, an artefact (of ``names``, all by default) that is not held."""
    present = set(present)
    problems = [f"{name}: extra {noun} not in the receipt" for name in sorted(present - artefacts.keys())]
    wanted = artefacts.keys() if names is None else set(names) & artefacts.keys()
    return problems + [f"{name}: missing" for name in sorted(wanted - present)]


def digest_problems(artefacts: Mapping[str, Mapping[str, Any]], digests: Mapping[str, tuple[str, int]]) -> list[str]:
    """Where the SHA-256 and size read of each artefact (``digests``, by path) differ from the receipt's."""
    problems = []
    for name, (sha256, size) in sorted(digests.items()):
        artefact = artefacts[name]
        if size != artefact.get("bytes"):
            problems.append(f"{name}: {size} bytes, receipt says {artefact.get('bytes')}")
        if sha256 != artefact.get("sha256"):
            problems.append(f"{name}: SHA-256 {sha256} does not match the receipt")
    return problems


def check_artefacts(
    root: Path,
    receipt_name: str,
    copies: Mapping[str, Path] | None = None,
    names: Iterable[str] | None = None,
) -> tuple[list[str], dict[str, tuple[str, int]]]:
    """``verify_artefacts`` for the artefacts in ``names`` (all by default; the file list is always
    checked), also returning the digest and size of each file read. ``copies`` maps artefacts to new
    files they are written to while they are hashed, so each byte is read once; a copy is good only
    when no problem is found."""
    problems, artefacts, regular = _plan(Path(root), receipt_name, names)
    digests = dict(zip(regular, _digests(Path(root), regular, copies), strict=True))
    return problems + digest_problems(artefacts, digests), digests


def _plan(
    root: Path, receipt_name: str, names: Iterable[str] | None = None
) -> tuple[list[str], dict[str, dict[str, Any]], list[str]]:
    """What can be told of a folder against its receipt without reading the files: the problems of its
    listing, the receipt's artefacts and the regular files among ``names`` (all by default) to hash."""
    try:
        artefacts = read_artefacts((root / receipt_name).read_bytes())
    except OSError as exc:
        return [f"{receipt_name}: unreadable receipt: {exc}"], {}, []
    except ValueError as exc:
        return [f"{receipt_name}: {exc}"], {}, []
    present = set(folder_files(root)) - {receipt_name}
    names = sorted(artefacts if names is None else set(names) & artefacts.keys())
    problems = listing_problems(artefacts, present, names=names)
    held = [name for name in names if name in present]
    irregular = [name for name in held if (root / name).is_symlink() or not (root / name).is_file()]
    problems += [f"{name}: not a regular file" for name in irregular]
    return problems, artefacts, [name for name in held if name not in irregular]


def write_receipt(
    shard_dir: Path,
    *,
    episode_id: str,
    episode_index: int,
    created_at: str,
    known: Mapping[str, tuple[str, int]] | None = None,
) -> bytes:
    """Write the shard's receipt over every file of the shard; returns the receipt's bytes. ``known``: digests
    and sizes of files hashed as they were written (by path in the shard); every other file is read."""
    receipt = {
        "schema": "ceres-browser-export-receipt",
        "version": 1,
        "episode_id": episode_id,
        "episode_index": episode_index,
        "created_at": created_at,
        "artefacts": build_artefacts(shard_dir, exclude=RECEIPT, known=known),
    }
    data = json_bytes(receipt)
    path = shard_dir / RECEIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def verify_shard(shard_dir: Path) -> list[str]:
    """Problems of an episode shard against its receipt; empty means intact."""
    return verify_artefacts(Path(shard_dir), RECEIPT)


def verify_shards(shard_dirs: Iterable[Path]) -> dict[Path, list[str]]:
    """``verify_shard`` of many shards at once: the files of every shard hashed on one pool of threads (the
    hashing releases the GIL, so a few files are read and hashed side by side, whatever shard they are in)."""
    plans = {shard: _plan(shard, RECEIPT) for shard in map(Path, shard_dirs)}
    work = [(shard, name) for shard, (_, _, regular) in plans.items() for name in regular]
    with ThreadPoolExecutor(max_workers=_HASH_THREADS) as pool:
        digests = dict(zip(work, pool.map(lambda job: file_digest(job[0] / job[1]), work), strict=True))
    return {shard: problems + digest_problems(artefacts, {name: digests[(shard, name)] for name in regular})
            for shard, (problems, artefacts, regular) in plans.items()}
