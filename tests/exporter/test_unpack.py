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


@pytest.mark.parametrize(("members", "expected"), [
    # A file and a folder of the same name: the second cannot be unpacked beside the first.
    ({"capture.json": b"{}", "capture.json/x": b"x"},
     r"capture\.json: is both a file and the folder of 'capture\.json/x'"),
    ({"media": b"x", "media/camera.mp4": b"x"}, r"media: is both a file and the folder of 'media/camera\.mp4'"),
    ({"rec/media": b"x", "rec/media/a/b.bin": b"x"}, r"rec/media: is both a file and the folder of"),
    ({"a" * 300: b"x"}, r"a{60}…: a file or folder name is longer than 255 bytes"),
    ({"media/" + "é" * 130: b"x"}, r"é{60}…: a file or folder name is longer than 255 bytes"),
    ({"media/bad\x01name": b"x"}, r"media/bad\\x01name: the path holds a control character"),
    ({"media/new\nline": b"x"}, r"media/new\\nline: the path holds a control character"),
    ({"/".join("d" * 9) + "/f": b"x"}, r"the path is 10 levels deep; at most 8 are allowed"),
    ({"capture.json": b"{}", "./capture.json": b"{}"}, r"capture\.json: duplicate archive entry"),
])
def test_member_paths_that_cannot_be_unpacked_are_named(tmp_path, members, expected):
    archive = _zip(tmp_path / "hostile.zip", members)
    dest = tmp_path / "out"
    with pytest.raises(SourceError, match=expected):
        unpack_source(archive, dest)
    assert list(dest.rglob("*")) == []


def test_a_nul_in_a_member_name_cannot_smuggle_a_second_manifest(tmp_path):
    """ZIP readers cut a name at NUL, so ``capture.json\\0.txt`` reads as a second ``capture.json``."""
    archive = tmp_path / "nul.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("capture.json", b"{}")
        out.writestr("capture.json.txt", b"{}")
    data = archive.read_bytes().replace(b"capture.json.txt", b"capture.json\0txt")
    archive.write_bytes(data)
    with pytest.raises(SourceError, match=r"capture\.json: duplicate archive entry"):
        unpack_source(archive, tmp_path / "out")


def test_a_folder_source_with_a_control_character_in_a_name_is_refused(tmp_path):
    folder = tmp_path / "src"
    (folder / "media").mkdir(parents=True)
    (folder / "capture.json").write_bytes(b"{}")
    (folder / "media" / "tab\there").write_bytes(b"x")
    with pytest.raises(SourceError, match=r"media/tab\\there: the path holds a control character"):
        unpack_source(folder, tmp_path / "out")
