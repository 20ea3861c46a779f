"""Bounded, link-free copying of a capture source (folder or ZIP) into a private scratch folder.

The exporter validates what a source means; this module only makes sure that reading it cannot
escape the scratch folder (zip-slip, links, device files) or exhaust the disk (a ZIP bomb): entry
count and total size are checked against the archive's directory first, and every byte written is
counted again while extracting, because the directory can lie.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

from exporter.errors import SourceError
from exporter.source import MANIFEST, folder_entry_is_file, zip_member_name

CHUNK = 1 << 20


class _Budget:
    def __init__(self, max_bytes: int, max_entries: int):
        self.bytes_left = max_bytes
        self.entries_left = max_entries
        self.max_bytes = max_bytes
        self.max_entries = max_entries

    def entry(self, name: str) -> None:
        self.entries_left -= 1
        if self.entries_left < 0:
            raise SourceError(f"more than {self.max_entries} entries", path=name)

    def spend(self, count: int, name: str) -> None:
        self.bytes_left -= count
        if self.bytes_left < 0:
            raise SourceError(f"expands to more than {self.max_bytes} bytes", path=name)


def _copy_stream(source, target: Path, budget: _Budget, name: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("xb") as out:
        while block := source.read(CHUNK):
            budget.spend(len(block), name)
            out.write(block)


def _extract_zip(archive_path: Path, dest: Path, budget: _Budget) -> None:
    try:
        with zipfile.ZipFile(archive_path) as archive:
            infos = archive.infolist()
            for info in infos:
                budget.entry(info.filename)
            declared = sum(info.file_size for info in infos)
            if declared > budget.max_bytes:
                raise SourceError(f"declares {declared} bytes, more than the limit of {budget.max_bytes}",
                                  path=archive_path.name)
            for info in infos:
                name = zip_member_name(info)
                if name is None:  # a folder entry: folders are made as files need them
                    continue
                target = dest.joinpath(*name.split("/"))
                if target.exists():
                    raise SourceError("duplicate archive entry", path=info.filename)
                with archive.open(info) as member:
                    _copy_stream(member, target, budget, info.filename)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, EOFError) as exc:
        raise SourceError(f"unreadable ZIP archive: {exc}", path=archive_path.name) from None


def _copy_folder(folder: Path, dest: Path, budget: _Budget) -> None:
    for dirpath, dirnames, filenames in os.walk(folder):
        for entry in sorted((*dirnames, *filenames)):
            full = Path(dirpath, entry)
            name = full.relative_to(folder).as_posix()
            budget.entry(name)
            if folder_entry_is_file(full, name):
                with full.open("rb") as stream:
                    _copy_stream(stream, dest / name, budget, name)
            else:
                dest.joinpath(name).mkdir(parents=True, exist_ok=True)


def unpack_source(source: Path, dest: Path, *, max_bytes: int, max_entries: int) -> Path:
    """Copy a capture source folder or ZIP into ``dest`` (new); returns the folder holding capture.json."""
    budget = _Budget(max_bytes, max_entries)
    dest.mkdir(parents=True)
    if source.is_symlink():
        raise SourceError("a capture source may not be a symbolic link", path=source.name)
    if source.is_dir():
        _copy_folder(source, dest, budget)
    elif source.is_file() and source.stat().st_size == 0:
        raise SourceError("empty file (0 bytes)", path=source.name)
    elif source.is_file() and zipfile.is_zipfile(source):
        _extract_zip(source, dest, budget)
    else:
        raise SourceError("not a capture source folder or ZIP archive", path=source.name)
    if not (dest / MANIFEST).exists():
        entries = list(dest.iterdir())
        if len(entries) == 1 and entries[0].is_dir():
            return entries[0]
    return dest


def source_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def content_digest(root: Path) -> str:
    """SHA-256 over the sorted (path, file SHA-256) pairs: equal for the same source as a folder or a ZIP."""
    entries = []
    for path in source_files(root):
        with path.open("rb") as stream:
            entries.append([path.relative_to(root).as_posix(), hashlib.file_digest(stream, "sha256").hexdigest()])
    return hashlib.sha256(json.dumps(entries, separators=(",", ":")).encode()).hexdigest()
