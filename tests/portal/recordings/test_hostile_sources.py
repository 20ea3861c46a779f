"""Hostile uploads: each is rejected with a reason, nothing crashes, nothing outside its prefix is touched."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest
from django_scopes import scope

from portal.audit.services import checkpoint_soon
from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path, ingest_received, receive_upload

pytestmark = pytest.mark.django_db


def _zip(path: Path, members: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return path


def _zip_bomb(path: Path, size: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("journal.ndjson", "w") as member:
        block = b"\0" * (1 << 20)
        for _ in range(size // len(block)):
            member.write(block)
    return path


def _zip_flagged_utf8(path: Path) -> Path:
    """A member name flagged UTF-8 (bit 11) whose bytes are not UTF-8."""
    _zip(path, {"capture.json": b"{}", "media/cafX.bin": b"x"})
    data = bytearray(path.read_bytes())
    for signature, flags_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        position = data.find(signature)
        while position >= 0:
            if data[position + name_at:position + name_at + 14] == b"media/cafX.bin":
                data[position + name_at:position + name_at + 14] = b"media/caf\xe9.bin"
                data[position + flags_at + 1] |= 0x08
            position = data.find(signature, position + 4)
    path.write_bytes(bytes(data))
    return path


def _random_bytes(path: Path) -> Path:
    path.write_bytes(os.urandom(4096))
    return path


def _empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _oversized_folder(make_capture, claims, size: int) -> Path:
    """A valid capture folder with an extra file that takes it over ``size`` bytes: a folder declares nothing,
    so only counting while copying can stop it."""
    source = make_capture(claims)
    with (source / "padding.bin").open("wb") as padding:
        padding.truncate(size)
    return source


def _symlink_folder(folder: Path, make_capture, claims) -> Path:
    source = make_capture(claims)
    (source / "media" / "secret").symlink_to("/etc/passwd")
    return source


@pytest.mark.parametrize(("build", "expected"), [
    (lambda tmp, mc, c: _zip(tmp / "slip.zip", {"../../escaped.txt": b"pwned", "capture.json": b"{}"}),
     "unsafe path"),
    (lambda tmp, mc, c: _zip(tmp / "abs.zip", {"/tmp/escaped-abs.txt": b"pwned"}), "unsafe path"),
    (lambda tmp, mc, c: _zip(tmp / "link.zip", {"capture.json": b"{}"}, symlinks={"journal.ndjson": "/etc/passwd"}),
     "symbolic links are not allowed"),
    (lambda tmp, mc, c: _symlink_folder(tmp, mc, c), "symbolic links are not allowed"),
    (lambda tmp, mc, c: _zip_bomb(tmp / "bomb.zip", 64 << 20),
     "bomb.zip: declares 67108864 bytes, more than the limit of 16777216"),
    (lambda tmp, mc, c: _oversized_folder(mc, c, 16 << 20), "padding.bin: expands to more than 16777216 bytes"),
    (lambda tmp, mc, c: _zip_bomb(tmp / "ratio.zip", 8 << 20), "more than 100 times the archive's size"),
    (lambda tmp, mc, c: _zip_flagged_utf8(tmp / "names.zip"),
     "media/caf\\xe9.bin: the entry's name is not valid UTF-8, though the archive flags it as UTF-8"),
    (lambda tmp, mc, c: _random_bytes(tmp / "random.zip"), "not a capture source folder or ZIP archive"),
    (lambda tmp, mc, c: _empty(tmp / "empty.zip"), "empty file (0 bytes)"),
    (lambda tmp, mc, c: _zip(tmp / "file-and-folder.zip", {"capture.json": b"{}", "capture.json/x": b"x"}),
     "capture.json: is both a file and the folder of 'capture.json/x'"),
    (lambda tmp, mc, c: _zip(tmp / "prefix.zip", {"media": b"x", "media/camera.mp4": b"x"}),
     "media: is both a file and the folder of 'media/camera.mp4'"),
    (lambda tmp, mc, c: _zip(tmp / "long-name.zip", {"capture.json": b"{}", "m" * 300: b"x"}),
     "a file or folder name is longer than 255 bytes"),
    (lambda tmp, mc, c: _zip(tmp / "control.zip", {"capture.json": b"{}", "media/a\x07b": b"x"}),
     "media/a\\x07b: the path holds a control character"),
    (lambda tmp, mc, c: _zip(tmp / "deep.zip", {"/".join("d" * 12): b"x"}), "levels deep; at most 8 are allowed"),
])
def test_hostile_source_is_rejected_and_contained(reg, make_capture, tmp_path, settings, stored_objects, build,
                                                  expected):
    settings.CERES_MAX_SOURCE_BYTES = 16 << 20
    hostile_dir = tmp_path / "hostile"
    hostile_dir.mkdir()
    source = build(hostile_dir, make_capture, reg.claims())
    before = sorted(p for p in tmp_path.rglob("*") if "storage" not in p.parts)
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, source)
    assert recording.state == Recording.State.REJECTED
    assert expected in recording.reason
    assert "internal error" not in recording.reason
    assert stored_objects("captures", reg.study.code) == []
    assert sorted(p for p in tmp_path.rglob("*") if "storage" not in p.parts) == before
    assert not Path("/tmp/escaped-abs.txt").exists()
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_zip_lying_about_its_sizes_is_cut_off(reg, tmp_path, settings):
    """The extraction counts bytes as they come, so a directory entry that under-declares cannot get past."""
    settings.CERES_MAX_SOURCE_BYTES = 4 << 20
    archive = _zip_bomb(tmp_path / "liar.zip", 8 << 20)
    data = bytearray(archive.read_bytes())
    # Patch the central directory's uncompressed size of the only entry (offset 24 in its header) to 1 KiB.
    central = data.rfind(b"PK\x01\x02")
    data[central + 24:central + 28] = (1024).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, archive)
    # The reader stops at the declared 1 KiB, whose CRC cannot be the one recorded for all 8 MiB.
    assert recording.state == Recording.State.REJECTED
    assert recording.reason == ("invalid capture source: liar.zip: unreadable ZIP archive: "
                                "Bad CRC-32 for file 'journal.ndjson'")


def test_upload_of_random_bytes_through_storage_is_rejected(reg, stored_objects, django_capture_on_commit_callbacks):
    import io

    with scope(study=reg.study), django_capture_on_commit_callbacks(execute=False) as callbacks:
        recording = receive_upload(reg.coordinator, reg.study, io.BytesIO(os.urandom(2048)),
                                            name="../../etc/evil name.zip", via="upload")
    # the ingest, queued after commit (besides the audit checkpoint every commit of events sends)
    assert len([callback for callback in callbacks if callback is not checkpoint_soon]) == 1
    assert recording.original_name == "evil_name.zip"
    assert stored_objects("captures", reg.study.code) == [recording.prefix + "incoming/evil_name.zip"]
    with scope(study=reg.study):
        ingest_received(recording)
    recording.refresh_from_db()
    assert recording.state == Recording.State.REJECTED and "not a capture source" in recording.reason
    assert stored_objects("captures", reg.study.code) == []
