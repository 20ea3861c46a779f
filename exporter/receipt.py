"""The shard's integrity receipt (shard.md section 9) and its verification."""

import hashlib
import json
from pathlib import Path
from typing import Any

RECEIPT = "ceres/browser-export-receipt.json"
MEDIA_TYPES = {".parquet": "application/vnd.apache.parquet", ".json": "application/json", ".mp4": "video/mp4"}


def _digest(path: Path) -> tuple[str, int]:
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            sha.update(block)
            size += len(block)
    return sha.hexdigest(), size


def _shard_files(shard_dir: Path) -> list[str]:
    return sorted(p.relative_to(shard_dir).as_posix() for p in shard_dir.rglob("*") if p.is_file() or p.is_symlink())


def write_receipt(shard_dir: Path, *, episode_id: str, episode_index: int, created_at: str) -> bytes:
    """Write the receipt over every file of the shard; returns the receipt's bytes."""
    artefacts = []
    for name in _shard_files(shard_dir):
        sha256, size = _digest(shard_dir / name)
        artefacts.append({"path": name, "sha256": sha256, "bytes": size, "media_type": MEDIA_TYPES[Path(name).suffix]})
    receipt = {
        "schema": "ceres-browser-export-receipt",
        "version": 1,
        "episode_id": episode_id,
        "episode_index": episode_index,
        "created_at": created_at,
        "artefacts": artefacts,
    }
    data = (json.dumps(receipt, indent=2, ensure_ascii=False) + "\n").encode()
    path = shard_dir / RECEIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def verify_shard(shard_dir: Path) -> list[str]:
    """Problems found (empty when the files are exactly the receipt's artefacts, digests and sizes)."""
    shard_dir = Path(shard_dir)
    try:
        receipt: Any = json.loads((shard_dir / RECEIPT).read_bytes())
        artefacts = {a["path"]: a for a in receipt["artefacts"]}
        if not all(isinstance(name, str) for name in artefacts):
            raise TypeError("an artefact path is not a string")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{RECEIPT}: unreadable receipt: {exc}"]
    problems = []
    present = set(_shard_files(shard_dir)) - {RECEIPT}
    for name in sorted(present - artefacts.keys()):
        problems.append(f"{name}: extra file not in the receipt")
    for name, artefact in sorted(artefacts.items()):
        path = shard_dir / name
        if name not in present:
            problems.append(f"{name}: missing")
        elif path.is_symlink() or not path.is_file():
            problems.append(f"{name}: not a regular file")
        else:
            sha256, size = _digest(path)
            if size != artefact.get("bytes"):
                problems.append(f"{name}: {size} bytes, receipt says {artefact.get('bytes')}")
            if sha256 != artefact.get("sha256"):
                problems.append(f"{name}: SHA-256 {sha256} does not match the receipt")
    return problems
