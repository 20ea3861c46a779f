"""Unpacking a capture source is bounded: entry count and bytes, declared and actually written."""

import struct
import zipfile
import zlib
from pathlib import Path

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


def _written(dest: Path) -> int:
    return sum(path.stat().st_size for path in dest.rglob("*") if path.is_file())


def _lie_about(archive: Path, member: str, *, size: int, crc: int) -> None:
    """Rewrite every header of ``member`` (local and central) to declare ``size`` bytes with ``crc``; the
    compressed data is left as it is."""
    data = bytearray(archive.read_bytes())
    # signature, offset of the name length, of the name, of the CRC-32, of the uncompressed size
    for signature, name_length_at, name_at, crc_at, size_at in ((b"PK\x03\x04", 26, 30, 14, 22),
                                                                (b"PK\x01\x02", 28, 46, 16, 24)):
        position = data.find(signature)
        while position >= 0:
            (length,) = struct.unpack_from("<H", data, position + name_length_at)
            if data[position + name_at:position + name_at + length] == member.encode():
                struct.pack_into("<I", data, position + crc_at, crc)
                struct.pack_into("<I", data, position + size_at, size)
            position = data.find(signature, position + 4)
    archive.write_bytes(bytes(data))


def test_a_folder_is_counted_while_copying_and_cut_off_at_the_limit(tmp_path):
    """A folder declares nothing: its bytes are counted as they are copied, and copying stops at the limit."""
    folder = tmp_path / "src"
    (folder / "media").mkdir(parents=True)
    (folder / "capture.json").write_bytes(b"{}")
    for part in range(3):
        (folder / "media" / f"part-{part}.bin").write_bytes(b"\0" * 60_000)
    dest = tmp_path / "out"
    with pytest.raises(SourceError, match=r"^media/part-1\.bin: expands to more than 100000 bytes$"):
        unpack_source(folder, dest, max_bytes=100_000)
    assert _written(dest) <= 100_000


def test_a_folder_with_too_many_entries_is_refused(tmp_path):
    folder = tmp_path / "src"
    (folder / "media").mkdir(parents=True)
    for i in range(12):
        (folder / "media" / f"{i:02d}.bin").write_bytes(b"x")
    with pytest.raises(SourceError, match=r"^media/09\.bin: more than 10 entries$"):
        unpack_source(folder, tmp_path / "out", max_entries=10)


def test_a_zip_member_larger_than_it_declares_is_never_written_past_its_declared_size(tmp_path):
    """A directory that under-declares (1 000 bytes for 300 000, with the CRC of all 300 000): the reader stops
    at the declared size, the CRC of what it read cannot match, and the archive is refused. Less than the
    declared size reaches the disk, so the declared total, checked first, bounds what a ZIP can write."""
    archive = _zip(tmp_path / "liar.zip", {"capture.json": b"{}", "journal.ndjson": b"\0" * 300_000})
    _lie_about(archive, "journal.ndjson", size=1000, crc=zlib.crc32(b"\0" * 300_000))
    dest = tmp_path / "out"
    refusal = r"^liar\.zip: unreadable ZIP archive: Bad CRC-32 for file 'journal\.ndjson'$"
    with pytest.raises(SourceError, match=refusal):
        unpack_source(archive, dest, max_bytes=100_000)
    assert _written(dest) <= 2 + 1000


def test_a_zip_member_is_what_its_directory_declares(tmp_path):
    """With a CRC that matches its first 1 000 bytes, the lying member unpacks as those 1 000 bytes: the
    compressed data beyond the declared size is never inflated."""
    archive = _zip(tmp_path / "liar.zip", {"capture.json": b"{}", "journal.ndjson": b"\0" * 300_000})
    _lie_about(archive, "journal.ndjson", size=1000, crc=zlib.crc32(b"\0" * 1000))
    root = unpack_source(archive, tmp_path / "out", max_bytes=100_000)
    assert (root / "journal.ndjson").read_bytes() == b"\0" * 1000
    assert _written(root) == 2 + 1000


def test_a_source_of_exactly_the_limits_unpacks(tmp_path):
    """The limits are inclusive: as many bytes and entries as allowed, as a ZIP and as a folder."""
    members = {"capture.json": b"{}", "media/camera.mp4": b"\0" * 99_998}
    archive = _zip(tmp_path / "full.zip", members)
    zipped = unpack_source(archive, tmp_path / "from-zip", max_bytes=100_000, max_entries=2)
    assert _written(zipped) == 100_000
    folder = tmp_path / "src"
    (folder / "media").mkdir(parents=True)
    for name, data in members.items():
        (folder / name).write_bytes(data)
    copied = unpack_source(folder, tmp_path / "from-folder", max_bytes=100_000, max_entries=3)  # media/ counts
    assert _written(copied) == 100_000
    with pytest.raises(SourceError, match=r"^media/camera\.mp4: expands to more than 99999 bytes$"):
        unpack_source(folder, tmp_path / "one-byte-less", max_bytes=99_999)
    with pytest.raises(SourceError, match=r"^media/camera\.mp4: more than 2 entries$"):
        unpack_source(folder, tmp_path / "one-entry-less", max_entries=2)


def test_a_path_exactly_as_deep_as_allowed_unpacks(tmp_path):
    deepest = "/".join("d" * 7) + "/f"  # 8 levels
    root = unpack_source(_zip(tmp_path / "deep.zip", {"capture.json": b"{}", deepest: b"x"}), tmp_path / "out")
    assert (root / deepest).read_bytes() == b"x"


def test_too_many_entries_are_refused(tmp_path):
    archive = _zip(tmp_path / "many.zip", {f"media/{i}.bin": b"x" for i in range(20)})
    with pytest.raises(SourceError, match="more than 10 entries"):
        unpack_source(archive, tmp_path / "out", max_entries=10)


def test_a_single_top_folder_is_the_source_root(tmp_path):
    archive = _zip(tmp_path / "wrapped.zip", {"rec/capture.json": b"{}", "rec/journal.ndjson": b""})
    root = unpack_source(archive, tmp_path / "out")
    assert sorted(p.name for p in root.iterdir()) == ["capture.json", "journal.ndjson"]


def test_a_second_top_folder_leaves_the_root_where_it_is(tmp_path):
    """Only a ZIP whose entries all lie in one top folder is read from inside it (docs/exporter.md): with a
    ``__MACOSX/`` beside it, the root is the archive's own, which holds no capture.json."""
    archive = _zip(tmp_path / "mac.zip", {"rec/capture.json": b"{}", "__MACOSX/rec/._capture.json": b"x"})
    dest = tmp_path / "out"
    assert unpack_source(archive, dest) == dest
    assert sorted(p.name for p in dest.iterdir()) == ["__MACOSX", "rec"]


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


def test_a_source_that_is_a_link_is_refused(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "capture.json").write_bytes(b"{}")
    (tmp_path / "link").symlink_to(folder)
    dest = tmp_path / "out"
    with pytest.raises(SourceError, match=r"^link: a capture source may not be a symbolic link$"):
        unpack_source(tmp_path / "link", dest)
    assert list(dest.iterdir()) == []


def test_a_folder_source_with_a_control_character_in_a_name_is_refused(tmp_path):
    folder = tmp_path / "src"
    (folder / "media").mkdir(parents=True)
    (folder / "capture.json").write_bytes(b"{}")
    (folder / "media" / "tab\there").write_bytes(b"x")
    with pytest.raises(SourceError, match=r"media/tab\\there: the path holds a control character"):
        unpack_source(folder, tmp_path / "out")
