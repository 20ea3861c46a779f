"""A ZIP's directory and expansion are checked before they cost anything: the entry count and the directory's
size from the end-of-central-directory record, names flagged UTF-8 that are not, and the expansion ratio."""

import struct
import zipfile
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.errors import SourceError
from exporter.source import unpack_source


def _zip(path: Path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _written(dest: Path) -> int:
    return sum(path.stat().st_size for path in dest.rglob("*") if path.is_file())


def _rename_member(archive: Path, old: bytes, new: bytes, *, utf8_flag: bool) -> None:
    """Replace a member's name (same length) in its local and central headers and set or clear bit 11 (the
    name is UTF-8) in both, as a hostile writer would."""
    assert len(old) == len(new)
    data = bytearray(archive.read_bytes())
    for signature, flags_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        position = data.find(signature)
        while position >= 0:
            if data[position + name_at:position + name_at + len(old)] == old:
                data[position + name_at:position + name_at + len(old)] = new
                (flags,) = struct.unpack_from("<H", data, position + flags_at)
                flags = flags | 0x800 if utf8_flag else flags & ~0x800
                struct.pack_into("<H", data, position + flags_at, flags)
            position = data.find(signature, position + 4)
    archive.write_bytes(bytes(data))


def _invalid_utf8_name(tmp_path: Path) -> Path:
    archive = _zip(tmp_path / "names.zip", {"capture.json": b"{}", "media/cafX.bin": b"x", "media/late.bin": b"y"})
    _rename_member(archive, b"media/cafX.bin", b"media/caf\xe9.bin", utf8_flag=True)
    return archive


def test_a_name_flagged_utf8_that_is_not_is_named(tmp_path):
    archive = _invalid_utf8_name(tmp_path)
    dest = tmp_path / "out"
    with pytest.raises(SourceError, match=r"^media/caf\\xe9\.bin: the entry's name is not valid UTF-8, though the "
                                          r"archive flags it as UTF-8$"):
        unpack_source(archive, dest)
    assert list(dest.rglob("*")) == []


def test_the_same_name_without_the_flag_is_read_as_cp437(tmp_path):
    """The bytes themselves are fine where the archive does not claim UTF-8 (ZIP's default, code page 437)."""
    archive = _zip(tmp_path / "names.zip", {"capture.json": b"{}", "media/cafX.bin": b"x"})
    _rename_member(archive, b"media/cafX.bin", b"media/caf\x82.bin", utf8_flag=False)
    root = unpack_source(archive, tmp_path / "out")
    assert (root / "media" / "café.bin").read_bytes() == b"x"


def test_the_command_line_names_the_invalid_name_without_a_traceback(tmp_path, capsys):
    archive = _invalid_utf8_name(tmp_path)
    out = tmp_path / "shard"
    assert main(["export", str(archive), str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "error: media/caf\\xe9.bin: the entry's name is not valid UTF-8, though the archive flags it as UTF-8"]
    assert not out.exists()


def _break_directory(archive: Path) -> None:
    """Overwrite every central directory header's signature, so reading the directory fails: a check that still
    answers from the end-of-central-directory record has not read it."""
    data = archive.read_bytes()
    archive.write_bytes(data.replace(b"PK\x01\x02", b"XX\x01\x02"))


def test_the_entry_count_is_checked_from_the_end_record_before_the_directory_is_read(tmp_path):
    archive = _zip(tmp_path / "many.zip", {f"media/{i}.bin": b"x" for i in range(20)})
    _break_directory(archive)
    dest = tmp_path / "out"
    with pytest.raises(SourceError, match=r"^many\.zip: its directory lists 20 entries; more than 10 entries are "
                                          r"not allowed$"):
        unpack_source(archive, dest, max_entries=10)
    assert list(dest.iterdir()) == []


def test_the_zip64_end_record_count_is_checked(tmp_path):
    """With 65 536 entries or more the count lives in the ZIP64 end record (the classic field says 0xFFFF)."""
    archive = tmp_path / "huge.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        for i in range(0x10000):
            out.writestr(zipfile.ZipInfo(f"{i:x}"), b"")
    data = archive.read_bytes()
    assert data.rfind(b"PK\x06\x06") > 0  # the writer did need the ZIP64 record
    _break_directory(archive)
    with pytest.raises(SourceError, match=r"^huge\.zip: its directory lists 65536 entries; more than 1000 entries "
                                          r"are not allowed$"):
        unpack_source(archive, tmp_path / "out")


def test_an_end_record_that_under_counts_does_not_get_more_entries_past(tmp_path):
    """The end record says 3 entries, the directory holds 40: the directory's own headers are counted, before
    any of them is read into an entry."""
    archive = _zip(tmp_path / "liar.zip", {f"m/{i}.bin": b"x" for i in range(40)})
    data = bytearray(archive.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 3, 3)
    archive.write_bytes(bytes(data))
    with pytest.raises(SourceError, match=r"^liar\.zip: its directory holds more than 10 entries$"):
        unpack_source(archive, tmp_path / "out", max_entries=10)


def test_a_directory_larger_than_its_entries_may_take_is_refused_unread(tmp_path):
    from exporter.limits import MAX_DIRECTORY_ENTRY_BYTES

    names = {f"m/{i:04d}-{'n' * 200}": b"" for i in range(60)}
    archive = _zip(tmp_path / "wide.zip", names)
    data = bytearray(archive.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 2, 2)  # claims 2 entries
    (directory_bytes,) = struct.unpack_from("<L", data, end + 12)
    assert directory_bytes > 2 * MAX_DIRECTORY_ENTRY_BYTES
    archive.write_bytes(bytes(data))
    _break_directory(archive)
    with pytest.raises(SourceError, match=rf"^wide\.zip: its directory takes {directory_bytes} bytes, more than 2 "
                                          r"entries may take$"):
        unpack_source(archive, tmp_path / "out", max_entries=2)


def _bomb(path: Path, size: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("capture.json", b"{}")
        with archive.open("media/camera.mp4", "w") as member:
            block = b"\0" * (1 << 20)
            for _ in range(size // len(block)):
                member.write(block)
    return path


def test_a_bomb_is_refused_by_its_expansion_ratio_before_anything_is_written(tmp_path):
    """64 MiB of zeros deflate to about 64 KB: a ratio of about 1000, over the default bound of 100."""
    archive = _bomb(tmp_path / "bomb.zip", 64 << 20)
    size = archive.stat().st_size
    assert 1000 * size < (64 << 20) + 2 < 2000 * size
    dest = tmp_path / "out"
    with pytest.raises(SourceError, match=rf"^bomb\.zip: declares {(64 << 20) + 2} bytes, more than 100 times the "
                                          rf"archive's size \({size} bytes\)$"):
        unpack_source(archive, dest)
    assert _written(dest) == 0


def test_the_ratio_is_configurable_and_inclusive(tmp_path):
    archive = _bomb(tmp_path / "bomb.zip", 8 << 20)
    expanded = (8 << 20) + 2
    ratio = -(-expanded // archive.stat().st_size)  # the smallest whole ratio the archive keeps to
    root = unpack_source(archive, tmp_path / "allowed", max_ratio=ratio)
    assert _written(root) == expanded
    with pytest.raises(SourceError, match=rf"more than {ratio - 1} times the archive's size"):
        unpack_source(archive, tmp_path / "refused", max_ratio=ratio - 1)
    assert _written(unpack_source(archive, tmp_path / "unbounded", max_ratio=None)) == expanded


def test_a_small_archive_may_expand_within_the_allowance(tmp_path):
    """A few compressible kilobytes (a ratio far over 100) stay within the 4 MiB allowance."""
    archive = _zip(tmp_path / "small.zip", {"capture.json": b"{}", "journal.ndjson": b"\0" * 200_000})
    assert 100 * archive.stat().st_size < 200_000
    assert _written(unpack_source(archive, tmp_path / "out")) == 200_002


def test_expansion_is_counted_while_streaming_too(tmp_path):
    """A directory that under-declares is still bounded while inflating: the ratio is checked on the bytes
    written, block by block, not only on what the directory declares."""
    from exporter.source import _Budget

    budget = _Budget(1 << 30, 10)
    assert budget.limit_expansion(10_000, 100) == 4 << 20  # the allowance, over 100 x 10 000 bytes
    budget.spend(4 << 20, "media/camera.mp4")
    with pytest.raises(SourceError, match=r"^media/camera\.mp4: expands to more than 100 times the archive's "
                                          r"size$"):
        budget.spend(1, "media/camera.mp4")
