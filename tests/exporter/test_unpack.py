"""Unpacking a capture source is bounded: entry count and bytes, declared and actually written."""

import zipfile

import pytest

from exporter.errors import SourceError
from exporter.source import unpack_source


def _zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_declared_size_over_the_limit_is_refused_before_writing(tmp_path):
    archive = _zip(tmp_path / "big.zip", {"capture.json": b"{}", "media/camera.mp4": b"\0" * 200_000})
    dest = tmp_path / "out"
    with pytest.raises(SourceError, match="declares 200002 bytes, more than the limit of 100000"):
        unpack_source(archive, dest, max_bytes=100_000)
    assert list(dest.iterdir()) == []


def test_too_many_entries_are_refused(tmp_path):
    archive = _zip(tmp_path / "many.zip", {f"media/{i}.bin": b"x" for i in range(20)})
    with pytest.raises(SourceError, match="more than 10 entries"):
        unpack_source(archive, tmp_path / "out", max_entries=10)


def test_a_single_top_folder_is_the_source_root(tmp_path):
    archive = _zip(tmp_path / "wrapped.zip", {"rec/capture.json": b"{}", "rec/journal.ndjson": b""})
    root = unpack_source(archive, tmp_path / "out")
    assert sorted(p.name for p in root.iterdir()) == ["capture.json", "journal.ndjson"]
