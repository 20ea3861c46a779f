"""The files of an unpacked capture source and its content digest (unpacking itself is
``exporter.source.unpack_source``: bounded and link-free)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def source_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def content_digest(root: Path) -> str:
    """SHA-256 over the sorted (path, file SHA-256) pairs: equal for the same source as a folder or a ZIP."""
    entries = []
    for path in source_files(root):
        with path.open("rb") as stream:
            entries.append([path.relative_to(root).as_posix(), hashlib.file_digest(stream, "sha256").hexdigest()])
    return hashlib.sha256(json.dumps(entries, separators=(",", ":")).encode()).hexdigest()
