"""Capture source: the container (folder or ZIP) and ``capture.json`` (capture-source.md sections 1, 2).

``open_source`` checks the container before anything is read from it; ``read_capture`` validates a
whole capture source, journal and media included, the way ingest needs it.
"""

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import stat
import struct
import tempfile
import unicodedata
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO, Any

import av

from exporter import forked
from exporter.errors import SourceError
from exporter.journal import DROPPED_KEYS, JOURNAL, Journal, Segment, parse_journal
from exporter.jsonfile import write_json
from exporter.limits import (
    EXPANSION_ALLOWANCE,
    MAX_DIRECTORY_ENTRY_BYTES,
    MAX_EXPANSION_RATIO,
    MAX_JSON_DEPTH,
    MAX_MEMBER_DEPTH,
    MAX_NAME_BYTES,
    MAX_SOURCE_BYTES,
    MAX_SOURCE_ENTRIES,
)
from exporter.receipt import file_digest

MANIFEST = "capture.json"
AVAILABILITIES = ("known", "unknown", "unavailable")
CAMERA_FORMATS = {("mp4", "h264"), ("mp4", "hevc"), ("webm", "vp8"), ("webm", "vp9")}
# A camera file at least this long is probed in a forked process beside the journal (below it, the process
# costs more than it saves).
PROBE_PROCESS_BYTES = 16 * 1024 * 1024
# PyAV demuxer name -> our container name, and the audio codecs a lone microphone file may hold.
MICROPHONE_FORMATS = {
    "mov,mp4,m4a,3gp,3g2,mj2": ("m4a", ("aac",)),
    "matroska,webm": ("webm", ("opus",)),
    "wav": ("wav", ("pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_u8")),
}
_CAPTURE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_CAMERA_KEY = re.compile(r"[a-z0-9_]+")
_RFC3339_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]00:00)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _finite_number(value: Any) -> bool:
    if type(value) not in (int, float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


# --- container ------------------------------------------------------------------------------------


def safe_member_name(name: str) -> str:
    """A member path as the spec allows it: relative, '/'-separated, no '..' or empty part (zip-slip),
    no control character, no component longer than a file system allows, at most ``MAX_MEMBER_DEPTH``
    folders deep."""
    shown = _printable(name)
    parts = name.rstrip("/").split("/")
    if (not name or name.startswith("/") or "\\" in name or re.match(r"[A-Za-z]:", name)
            or any(part in ("..", "") for part in parts)):
        raise SourceError("unsafe path (absolute, '..', empty part, drive or '\\') rejected", path=shown)
    if any(unicodedata.category(char) == "Cc" for char in name):
        raise SourceError("the path holds a control character", path=shown)
    if len(parts) > MAX_MEMBER_DEPTH:
        raise SourceError(f"the path is {len(parts)} levels deep; at most {MAX_MEMBER_DEPTH} are allowed",
                          path=shown)
    for part in parts:
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise SourceError(f"a file or folder name is longer than {MAX_NAME_BYTES} bytes",
                              path=_printable(part[:60]) + "…")
    return str(PurePosixPath(name))


def _printable(name: str) -> str:
    """A member name fit for an error message: control characters escaped, long names cut."""
    shown = "".join(char if unicodedata.category(char) != "Cc" else repr(char)[1:-1] for char in name)
    return shown if len(shown) <= 200 else shown[:200] + "…"


def check_member_tree(names: Iterable[str]) -> None:
    """Refuse a set of member files in which one path is also a folder of another (``a`` and ``a/b``):
    they cannot both be unpacked."""
    files = set(names)
    for name in sorted(files):
        parts = name.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in files:
                raise SourceError(f"is both a file and the folder of {_printable(name)!r}", path=_printable(folder))


def zip_member_name(info: zipfile.ZipInfo) -> str | None:
    """The checked relative name of a ZIP entry, or None for a directory entry.

    Links, device files, FIFOs and sockets are refused by the type bits the archive records.
    """
    name = safe_member_name(info.filename)
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        raise SourceError("symbolic links are not allowed in a capture source", path=name)
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise SourceError("device files, FIFOs and sockets are not allowed", path=name)
    if info.is_dir() or kind == stat.S_IFDIR:
        return None
    return name


def folder_entry_is_file(path: Path, name: str) -> bool:
    """True for a regular file, False for a folder; links, special files and unsafe names are refused."""
    safe_member_name(name)
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        raise SourceError("symbolic links are not allowed in a capture source", path=name)
    if stat.S_ISREG(mode):
        return True
    if stat.S_ISDIR(mode):
        return False
    raise SourceError("device files, FIFOs and sockets are not allowed", path=name)


class Container:
    """Read access to the regular files of a capture source, by relative path."""

    label: str
    files: frozenset[str]

    def open(self, name: str) -> IO[bytes]:
        raise NotImplementedError

    def local_path(self, name: str) -> Path:
        """A file-system path of the member (extracted for a ZIP), valid while the source is open."""
        raise NotImplementedError


class FolderContainer(Container):
    def __init__(self, root: Path):
        self.root = root
        self.label = str(root)
        files = set()
        for dirpath, dirnames, filenames in os.walk(root):
            for entry in (*dirnames, *filenames):
                full = Path(dirpath, entry)
                name = full.relative_to(root).as_posix()
                if folder_entry_is_file(full, name):
                    files.add(name)
        self.files = frozenset(files)

    def open(self, name: str) -> IO[bytes]:
        return (self.root / name).open("rb")

    def local_path(self, name: str) -> Path:
        return self.root / name


class _Budget:
    """What unpacking may still write: entries and bytes, counted as they come (an archive's directory can lie).
    ``expansion``: for a ZIP, the most its members may expand to (``ratio`` times the archive's size)."""

    def __init__(self, max_bytes: int, max_entries: int):
        self.bytes_left = max_bytes
        self.entries_left = max_entries
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.expansion_left: int | None = None
        self.ratio: int | None = None

    def limit_expansion(self, archive_bytes: int, ratio: int | None) -> int | None:
        """Bound what the archive's members may expand to; returns the bound (None: no ratio applies)."""
        if ratio is None:
            return None
        self.ratio = ratio
        self.expansion_left = max(ratio * archive_bytes, EXPANSION_ALLOWANCE)
        return self.expansion_left

    def entry(self, name: str) -> None:
        self.entries_left -= 1
        if self.entries_left < 0:
            raise SourceError(f"more than {self.max_entries} entries", path=name)

    def spend(self, count: int, name: str) -> None:
        self.bytes_left -= count
        if self.bytes_left < 0:
            raise SourceError(f"expands to more than {self.max_bytes} bytes", path=name)
        if self.expansion_left is not None:
            self.expansion_left -= count
            if self.expansion_left < 0:
                raise SourceError(f"expands to more than {self.ratio} times the archive's size", path=name)


def _copy_stream(source, target: Path, budget: _Budget, name: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("xb") as out:
        while block := source.read(1 << 20):
            budget.spend(len(block), name)
            out.write(block)


_EOCD = struct.Struct("<4s4H2LH")  # end of central directory: signature ... entries, directory size, offset
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_DIRECTORY_ENTRY = struct.Struct("<4s4s2H16x3H12x")  # signature, versions, flags, method; name/extra/comment lengths


def _scan_directory(archive_path: Path, budget: _Budget) -> None:
    """Check a ZIP's central directory before ``zipfile`` reads it (it builds an object per entry, whatever the
    count): the entry count and the directory's size from the end-of-central-directory record (and its ZIP64
    form), then each entry's header walked in place, so a record that under-counts cannot get more entries past,
    and a name the archive flags as UTF-8 (bit 11) that is not is named. Anything else unreadable is left to
    ``zipfile`` to report."""
    size = archive_path.stat().st_size
    with archive_path.open("rb") as stream:
        tail_start = max(0, size - (_EOCD.size + 0xFFFF))
        stream.seek(tail_start)
        tail = stream.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < _EOCD.size:
            return
        _, _, _, _, entries, directory_bytes, _, _ = _EOCD.unpack_from(tail, at)
        end = tail_start + at  # where the directory ends
        if at >= _ZIP64_LOCATOR.size + _ZIP64_EOCD.size:
            signature, _, _, _ = _ZIP64_LOCATOR.unpack_from(tail, at - _ZIP64_LOCATOR.size)
            record_at = at - _ZIP64_LOCATOR.size - _ZIP64_EOCD.size
            record = _ZIP64_EOCD.unpack_from(tail, record_at)
            if signature == b"PK\x06\x07" and record[0] == b"PK\x06\x06":
                entries, directory_bytes = max(entries, record[7]), max(directory_bytes, record[8])
                end = tail_start + record_at
        name = archive_path.name
        if entries > budget.max_entries:
            raise SourceError(f"its directory lists {entries} entries; more than {budget.max_entries} entries are "
                              f"not allowed", path=name)
        if directory_bytes > budget.max_entries * MAX_DIRECTORY_ENTRY_BYTES:
            raise SourceError(f"its directory takes {directory_bytes} bytes, more than {budget.max_entries} entries "
                              f"may take", path=name)
        if directory_bytes > end:
            return
        stream.seek(end - directory_bytes)
        directory = stream.read(directory_bytes)
    position, count = 0, 0
    while position + _DIRECTORY_ENTRY.size <= len(directory):
        signature, _, flags, _, name_length, extra_length, comment_length = \
            _DIRECTORY_ENTRY.unpack_from(directory, position)
        if signature != b"PK\x01\x02":
            return
        count += 1
        if count > budget.max_entries:
            raise SourceError(f"its directory holds more than {budget.max_entries} entries", path=name)
        raw = directory[position + _DIRECTORY_ENTRY.size:position + _DIRECTORY_ENTRY.size + name_length]
        if flags & 0x800:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                shown = _printable(raw.decode("utf-8", "backslashreplace"))
                raise SourceError("the entry's name is not valid UTF-8, though the archive flags it as UTF-8",
                                  path=shown) from None
        position += _DIRECTORY_ENTRY.size + name_length + extra_length + comment_length


def _extract_zip(archive_path: Path, dest: Path, budget: _Budget, max_ratio: int | None = None) -> None:
    _scan_directory(archive_path, budget)
    expansion = budget.limit_expansion(archive_path.stat().st_size, max_ratio)
    try:
        with zipfile.ZipFile(archive_path) as archive:
            infos = archive.infolist()
            for info in infos:
                budget.entry(info.filename)
            declared = sum(info.file_size for info in infos)
            if declared > budget.max_bytes:
                raise SourceError(f"declares {declared} bytes, more than the limit of {budget.max_bytes}",
                                  path=archive_path.name)
            if expansion is not None and declared > expansion:
                raise SourceError(f"declares {declared} bytes, more than {max_ratio} times the archive's size "
                                  f"({archive_path.stat().st_size} bytes)", path=archive_path.name)
            members = [(info, name) for info in infos if (name := zip_member_name(info)) is not None]
            names = [name for _, name in members]  # folder entries are left out: folders are made as needed
            repeated = [name for name, count in Counter(names).items() if count > 1]
            if repeated:
                raise SourceError("duplicate archive entry", path=_printable(repeated[0]))
            check_member_tree(names)
            for info, name in members:
                with archive.open(info) as member:
                    _copy_stream(member, dest.joinpath(*name.split("/")), budget, name)
    except UnicodeDecodeError as exc:  # a name flagged UTF-8 that the scan above did not reach
        shown = _printable(bytes(exc.object).decode("utf-8", "backslashreplace"))
        raise SourceError("an entry's name is not valid UTF-8, though the archive flags it as UTF-8",
                          path=shown) from None
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


def unpack_source(source: Path, dest: Path, *, max_bytes: int = MAX_SOURCE_BYTES,
                  max_entries: int = MAX_SOURCE_ENTRIES, max_ratio: int | None = MAX_EXPANSION_RATIO) -> Path:
    """Copy a capture source folder or ZIP into ``dest`` (new); returns the folder holding capture.json.
    ``max_ratio``: how many times its own size a ZIP may expand to (beyond ``EXPANSION_ALLOWANCE``; None: any)."""
    budget = _Budget(max_bytes, max_entries)
    dest.mkdir(parents=True)
    if source.is_symlink():
        raise SourceError("a capture source may not be a symbolic link", path=source.name)
    if source.is_dir():
        _copy_folder(source, dest, budget)
    elif source.is_file() and source.stat().st_size == 0:
        raise SourceError("empty file (0 bytes)", path=source.name)
    elif source.is_file() and zipfile.is_zipfile(source):
        _extract_zip(source, dest, budget, max_ratio)
    else:
        raise SourceError("not a capture source folder or ZIP archive", path=source.name)
    if not (dest / MANIFEST).exists():
        entries = list(dest.iterdir())
        if len(entries) == 1 and entries[0].is_dir():
            return entries[0]
    return dest


@contextlib.contextmanager
def open_source(source: Path) -> Iterator[Container]:
    """Open a capture source folder or ZIP archive; every path in it is checked first.

    A ZIP is unpacked into a temporary folder through ``unpack_source`` (bounded, link-free), so there
    is one way to read an archive and it cannot fill the disk.
    """
    source = Path(source)
    if source.is_dir() and not source.is_symlink():
        yield FolderContainer(source)
        return
    with tempfile.TemporaryDirectory(prefix="ceres-source-") as scratch:
        yield FolderContainer(unpack_source(source, Path(scratch) / "source"))


# --- capture.json -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CameraSpec:
    selected: str
    media: str
    width: int
    height: int
    frame_rate: float
    first_frame_source_time: float
    characteristics: dict[str, Any]


@dataclass(frozen=True)
class TaskSpecification:
    version: str
    canonical: bytes
    sha256: str

    @property
    def path(self) -> str:
        return f"ceres/task-specifications/{self.sha256}.json"


@dataclass
class Capture:
    """A validated capture source. ``camera_probe`` is the camera file as decoded (the truth)."""

    capture_id: str
    recorded_at: str
    rate_hz: int
    camera: CameraSpec | None
    camera_probe: Any  # exporter.video.CameraProbe | None
    calibration: dict[str, Any] | None
    capture_device: dict[str, Any]
    study_claims: dict[str, Any]
    audio_in_source: bool
    microphone_media: str | None  # ``audio.media``: the camera file or a separate microphone file
    task_specification: TaskSpecification | None
    journal: Journal
    warnings: list[str]

    @property
    def retained_segments(self) -> list[Segment]:
        """The segments that become rows (every outcome but ``retry``), by start slot."""
        return [s for s in self.journal.segments if s.retained]

    @property
    def dropped_retries(self) -> int:
        return len(self.journal.segments) - len(self.retained_segments)

    @property
    def row_count(self) -> int:
        """Rows of the episode this source exports to: one per slot of each retained segment."""
        return sum(s.end_slot - s.start_slot for s in self.retained_segments)

    @property
    def tasks(self) -> list[str]:
        """The distinct task texts of the retained segments, in first-use order."""
        return list(dict.fromkeys(s.task for s in self.retained_segments))

    @property
    def audio_files(self) -> list[str]:
        """The files that hold raw microphone audio: the camera file when it has an audio track, and the
        separate microphone file when there is one."""
        files = [self.camera.media] if self.camera is not None and self.camera_probe.has_audio else []
        if self.microphone_media and self.microphone_media not in files:
            files.append(self.microphone_media)
        return files


def scrub(value: Any, where: str) -> Any:
    """Drop every ``device_id`` / ``user_agent`` key, at any depth (this rule wins over all others),
    and reject text that cannot be written as UTF-8 (a lone surrogate escape)."""
    if isinstance(value, dict):
        return {scrub(k, where): scrub(v, where) for k, v in value.items() if k not in DROPPED_KEYS}
    if isinstance(value, list):
        return [scrub(v, where) for v in value]
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise SourceError(f"text {value!r} holds a lone surrogate escape", path=where) from None
    return value


class _Manifest:
    """Typed access to capture.json whose errors name the key."""

    def __init__(self, data: dict[str, Any]):
        self.data = data

    def fail(self, key: str, message: str) -> SourceError:
        return SourceError(f"'{key}' {message}", path=MANIFEST)

    def get(self, obj: dict[str, Any], key: str, prefix: str = "", *, required: bool = True) -> Any:
        if key not in obj or (not required and obj[key] is None):
            if required:
                raise self.fail(f"{prefix}{key}", "is required")
            return None
        return obj[key]

    def string(self, obj: dict[str, Any], key: str, prefix: str = "", *, required: bool = True) -> Any:
        value = self.get(obj, key, prefix, required=required)
        if (value is not None or required) and not isinstance(value, str):
            raise self.fail(f"{prefix}{key}", "must be a string")
        return value

    def integer(self, obj: dict[str, Any], key: str, prefix: str = "", low: int = 0, high: int | None = None) -> int:
        value = self.get(obj, key, prefix)
        if type(value) is not int or value < low or (high is not None and value > high):
            bounds = f" from {low} to {high}" if high is not None else f" >= {low}"
            raise self.fail(f"{prefix}{key}", f"must be an integer{bounds}")
        return value

    def number(self, obj: dict[str, Any], key: str, prefix: str = "") -> float:
        value = self.get(obj, key, prefix)
        if not _finite_number(value):
            raise self.fail(f"{prefix}{key}", "must be a finite number")
        return float(value)

    def positive(self, obj: dict[str, Any], key: str, prefix: str = "") -> float:
        value = self.number(obj, key, prefix)
        if value <= 0:
            raise self.fail(f"{prefix}{key}", "must be greater than 0")
        return value

    def obj(self, obj: dict[str, Any], key: str, prefix: str = "", *, required: bool = False) -> Any:
        value = self.get(obj, key, prefix, required=required)
        if (value is not None or required) and not isinstance(value, dict):
            raise self.fail(f"{prefix}{key}", "must be an object" + ("" if required else " or null"))
        return value

    def timestamp(self, obj: dict[str, Any], key: str, prefix: str = "") -> str:
        value = self.string(obj, key, prefix)
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            value = ""
        if not _RFC3339_UTC.fullmatch(value):
            raise self.fail(f"{prefix}{key}", "must be an RFC 3339 UTC time such as 2026-03-01T12:00:00Z")
        return obj[key]

    def availability(self, obj: Any, key: str) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise self.fail(key, "must be an object")
        for name, value in obj.items():
            where = f"{key}.{name}"
            shape_ok = isinstance(value, dict) and value.get("availability") in AVAILABILITIES
            if shape_ok and value["availability"] == "known":
                shape_ok = set(value) == {"availability", "value"}
            elif shape_ok:
                shape_ok = set(value) == {"availability"}
            if not shape_ok:
                raise self.fail(
                    where,
                    'must be {"availability": "unknown"|"unavailable"} or {"availability": "known", "value": V}',
                )
        return obj

    def media_path(self, value: str, key: str, files: frozenset[str]) -> str:
        try:
            name = safe_member_name(value)
        except SourceError:
            raise self.fail(key, f"is not a safe relative path: {value!r}") from None
        if name not in files:
            raise self.fail(key, f"names a file that is not in the capture source: {value!r}")
        return name


def _load_json(container: Container, name: str) -> Any:
    with container.open(name) as stream:
        return parse_json(stream.read(), name)


def parse_json(data: bytes, name: str) -> Any:
    """A JSON file of a capture source, from its bytes, as the reader takes it: UTF-8, no NaN or Infinity, at
    most ``MAX_JSON_DEPTH`` levels deep; ``SourceError`` naming ``name`` otherwise."""

    def reject(constant: str) -> None:
        raise ValueError(f"{constant} is not allowed")

    try:
        value = json.loads(data.decode("utf-8"), parse_constant=reject)
    except ValueError as exc:  # includes UnicodeDecodeError and over-long integers
        raise SourceError(f"invalid JSON: {exc}", path=name) from None
    except RecursionError:
        value = None
    if value is None or _nesting(value) > MAX_JSON_DEPTH:
        raise SourceError(f"invalid JSON: arrays or objects nested more than {MAX_JSON_DEPTH} levels deep",
                          path=name)
    return value


def _nesting(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value (walked without recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            todo.extend((child, depth + 1) for child in children)
    return deepest


def _parse_manifest(container: Container) -> tuple[dict[str, Any], _Manifest]:
    if MANIFEST not in container.files:
        raise SourceError("missing (expected at the source root or inside one top-level folder)", path=MANIFEST)
    if JOURNAL not in container.files:
        raise SourceError("missing: the durable source journal is required", path=JOURNAL)
    data = _load_json(container, MANIFEST)
    if not isinstance(data, dict):
        raise SourceError("must be a JSON object", path=MANIFEST)
    data = scrub(data, MANIFEST)
    m = _Manifest(data)
    if m.string(data, "schema") != "ceres-capture-source":
        raise m.fail("schema", 'must be "ceres-capture-source"')
    version = m.get(data, "version")
    if version != 1 or type(version) is not int:
        raise SourceError(f"unsupported capture source version {json.dumps(version)}", path=MANIFEST)
    return data, m


def _camera(data: dict[str, Any], m: _Manifest, files: frozenset[str]) -> CameraSpec | None:
    camera = m.obj(data, "camera")
    if camera is None:
        return None
    selected = m.string(camera, "selected", "camera.")
    if not _CAMERA_KEY.fullmatch(selected):
        raise m.fail("camera.selected", "must match [a-z0-9_]+")
    characteristics = camera.get("characteristics", {})
    return CameraSpec(
        selected=selected,
        media=m.media_path(m.string(camera, "media", "camera."), "camera.media", files),
        width=m.integer(camera, "width", "camera.", low=1),
        height=m.integer(camera, "height", "camera.", low=1),
        frame_rate=m.positive(camera, "frame_rate", "camera."),
        first_frame_source_time=m.number(camera, "first_frame_source_time", "camera."),
        characteristics=m.availability(characteristics, "camera.characteristics"),
    )


def _calibration(data: dict[str, Any], m: _Manifest) -> dict[str, Any] | None:
    calibration = m.obj(data, "calibration")
    if calibration is None:
        return None
    p = "calibration."
    if m.get(calibration, "model", p) != "pinhole-radtan5":
        raise m.fail("calibration.model", 'must be "pinhole-radtan5"')
    intrinsics = m.obj(calibration, "intrinsics", p, required=True)
    distortion = m.get(calibration, "distortion", p)
    if not isinstance(distortion, list) or len(distortion) != 5 or not all(map(_finite_number, distortion)):
        raise m.fail("calibration.distortion", "must be an array of 5 finite numbers [k1, k2, p1, p2, k3]")
    return {
        "model": "pinhole-radtan5",
        "intrinsics": {k: m.number(intrinsics, k, "calibration.intrinsics.") for k in ("fx", "fy", "cx", "cy")},
        "distortion": [float(v) for v in distortion],
        "rms_error_px": m.number(calibration, "rms_error_px", p),
        "sample_count": m.integer(calibration, "sample_count", p),
        "captured_at": m.timestamp(calibration, "captured_at", p),
    }


STUDY_KEYS = ("headset_id", "demonstrator_id", "project_id", "consent_date", "consent_document_id")


def check_study_block(study: Any, where: str) -> dict[str, Any]:
    """Validate a study block (recorder claims or the portal's override); returns it normalised."""
    if not isinstance(study, dict):
        raise SourceError("the study block must be a JSON object", path=where)
    out: dict[str, Any] = {}
    for key in STUDY_KEYS:
        value = study.get(key)
        if value is not None and not isinstance(value, str):
            raise SourceError(f"'study.{key}' must be a string or null", path=where)
        out[key] = value or None  # a blank demonstrator id is assigned later, never invented here
    if out["consent_date"] is not None:
        try:
            valid = bool(_DATE.fullmatch(out["consent_date"])) and date.fromisoformat(out["consent_date"])
        except ValueError:
            valid = False
        if not valid:
            raise SourceError("'study.consent_date' must be a date YYYY-MM-DD", path=where)
    return out


def _task_specification(
    data: dict[str, Any], m: _Manifest, container: Container, warnings: list[str]
) -> TaskSpecification | None:
    declared = m.obj(data, "task_specification")
    if declared is None:
        if "task-specification.json" in container.files:
            warnings.append("task-specification.json is not declared in capture.json and was not exported")
        return None
    version = m.string(declared, "version", "task_specification.")
    path = m.media_path(m.string(declared, "path", "task_specification."), "task_specification.path", container.files)
    value = _load_json(container, path)
    if not isinstance(value, dict):
        raise SourceError("a task specification must be a JSON object", path=path)
    canonical = json.dumps(scrub(value, path), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return TaskSpecification(version=version, canonical=canonical, sha256=hashlib.sha256(canonical).hexdigest())


def _named(text: str, path: Path, name: str) -> str:
    """``text`` (a media library's message) with the file's local path (where a ZIP source was unpacked: a
    server's temporary folder) replaced by its name in the capture."""
    return text.replace(str(path), name)


def _probe_camera(path: Path, name: str) -> Any:
    """The camera file's probe; its errors name the file as the capture does (``name``)."""
    from exporter.video import probe_camera

    try:
        return probe_camera(path)
    except SourceError as exc:
        raise SourceError(_named(str(exc), path, name).removeprefix(f"{name}: "), path=name) from None


def _microphone_has_audio(path: Path, name: str) -> bool:
    """Check a lone microphone file's container and codec; True when it holds an audio stream."""
    try:
        with av.open(str(path)) as media:
            kind = MICROPHONE_FORMATS.get(media.format.name)
            codecs = [s.codec_context.name for s in media.streams.audio]
    except (av.FFmpegError, UnicodeDecodeError) as exc:
        raise SourceError(f"not a readable media file: {_named(str(exc), path, name)}", path=name) from None
    if kind is None:
        raise SourceError(f"unsupported microphone container {media.format.name!r}", path=name)
    bad = [c for c in codecs if c not in kind[1]]
    if bad:
        raise SourceError(f"unsupported audio codec {bad[0]!r} in a {kind[0]} microphone file", path=name)
    return bool(codecs)


def _check_media(
    data: dict[str, Any], m: _Manifest, container: Container, camera: CameraSpec | None, probe: Any
) -> tuple[bool, str | None]:
    """Check the microphone settings and that every media file is accounted for; whether audio exists and
    where ``audio.media`` points."""
    audio = m.obj(data, "audio") or {}
    enabled = audio.get("microphone_enabled", False)
    if not isinstance(enabled, bool):
        raise m.fail("audio.microphone_enabled", "must be a boolean")
    media = m.string(audio, "media", "audio.", required=False)
    if media is not None and not enabled:
        raise m.fail("audio.media", "is set but audio.microphone_enabled is not true")
    referenced = {camera.media} if camera else set()
    has_audio = bool(probe and probe.has_audio)
    if media is not None:
        media = m.media_path(media, "audio.media", container.files)
        if camera is not None and media == camera.media:
            if not probe.has_audio:
                raise m.fail("audio.media", f"names the camera file {media}, which has no audio stream")
        elif not _microphone_has_audio(container.local_path(media), media):
            raise m.fail("audio.media", f"names {media}, which has no audio stream")
        else:
            has_audio = True
        referenced.add(media)
    for name in sorted(container.files):
        if name.startswith("media/") and name not in referenced:
            raise SourceError("media file not referenced by capture.json (it could not be governed)", path=name)
    return has_audio, media


def _check_probe(probe: Any, camera: CameraSpec, warnings: list[str]) -> Any:
    """The camera's probe checked against what capture.json declares."""
    if (probe.container, probe.codec) not in CAMERA_FORMATS:
        raise SourceError(
            f"unsupported camera media: {probe.codec} video in {probe.container} "
            "(expected H.264/HEVC in MP4 or VP8/VP9 in WebM)",
            path=camera.media,
        )
    if (probe.width, probe.height) != (camera.width, camera.height):
        warnings.append(
            f"camera declared {camera.width}x{camera.height} but {camera.media} is {probe.width}x{probe.height}"
        )
    measured = probe.measured_frame_rate
    if measured is None:
        warnings.append(f"camera frame rate cannot be measured ({probe.frame_count} frames); declared rate used")
    elif abs(measured - camera.frame_rate) > 0.01 * camera.frame_rate:
        warnings.append(f"camera declared {camera.frame_rate:g} fps but {camera.media} measures {measured:.3f} fps")
    return probe


def parse_capture(container: Container) -> Capture:
    """Validate everything in an open capture source and parse its journal."""
    data, m = _parse_manifest(container)
    warnings: list[str] = []
    capture_id = m.string(data, "capture_id")
    if not _CAPTURE_ID.fullmatch(capture_id):
        raise m.fail("capture_id", "must be 1-128 characters of [A-Za-z0-9._-]")
    recorded_at = m.timestamp(data, "recorded_at")
    recorder = m.obj(data, "recorder", required=True)
    rate_hz = m.integer(recorder, "rate_hz", "recorder.", low=1, high=240)
    camera = _camera(data, m, container.files)
    calibration = _calibration(data, m)
    capture_device = m.availability(data.get("capture_device") or {}, "capture_device")
    study = m.obj(data, "study")
    study_claims = check_study_block(study or {}, MANIFEST)
    task_specification = _task_specification(data, m, container, warnings)

    def reopen() -> IO[bytes]:
        return container.open(JOURNAL)

    # The camera's probe (a pass over its packets) runs beside the journal, in a forked process for a long
    # camera file; its errors and the media's are still reported before the journal's, as if it ran first.
    probing = None
    if camera:
        path = container.local_path(camera.media)
        long_file = path.stat().st_size >= PROBE_PROCESS_BYTES
        probing = forked.Job(partial(_probe_camera, path, camera.media), fork=long_file)
    journal_error = None
    try:
        try:
            with container.open(JOURNAL) as stream:
                journal = parse_journal(stream, rate_hz, reopen)
        except SourceError as exc:
            journal_error = exc
        probe = _check_probe(probing.result(), camera, warnings) if probing is not None else None
    finally:
        if probing is not None:
            probing.stop()
    audio_in_source, microphone_media = _check_media(data, m, container, camera, probe)
    if journal_error is not None:
        raise journal_error
    if not any(s.retained for s in journal.segments):
        raise SourceError("no retained segments (the journal is empty or holds only retries)", path=JOURNAL)
    if len(journal.slots) == 0:
        raise SourceError("segments but no frame or gap record: slot times are unknown", path=JOURNAL)
    return Capture(
        capture_id=capture_id,
        recorded_at=recorded_at,
        rate_hz=rate_hz,
        camera=camera,
        camera_probe=probe,
        calibration=calibration,
        capture_device=capture_device,
        study_claims=study_claims,
        audio_in_source=audio_in_source,
        microphone_media=microphone_media,
        task_specification=task_specification,
        journal=journal,
        warnings=journal.warnings + warnings,
    )


def read_capture(source: Path) -> Capture:
    """Validate a capture source completely (manifest, journal, media) without exporting it."""
    with open_source(source) as container:
        return parse_capture(container)


def make_silent(root: Path, capture: Capture) -> Capture:
    """Remove the raw microphone audio from an unpacked capture source folder, in place: the camera file is
    remuxed without its audio track (video packets copied, not re-encoded), a separate microphone file is
    deleted, and ``capture.json`` says ``audio.media: null``. Returns the silent source's ``Capture``.
    """
    from exporter.video import decode_order_pts, strip_audio

    files = capture.audio_files
    if not files:
        return capture
    root = Path(root)
    probe = capture.camera_probe
    for name in files:
        path = root / name
        if capture.camera is not None and name == capture.camera.media:
            silent = path.with_name(f".{path.name}.silent")
            strip_audio(path, silent)
            silent.replace(path)
            probe = dataclasses.replace(probe, has_audio=False, decode_order_pts=decode_order_pts(path))
        else:
            path.unlink()
    manifest_path = root / MANIFEST
    manifest = json.loads(manifest_path.read_bytes())
    if isinstance(manifest.get("audio"), dict):
        manifest["audio"]["media"] = None
    write_json(manifest_path, manifest)
    return dataclasses.replace(capture, camera_probe=probe, audio_in_source=False, microphone_media=None)


def source_digest(root: Path) -> str:
    """The content digest of an unpacked capture source: SHA-256 over its sorted (path, file SHA-256) pairs,
    so the same recording has the same digest as a folder, a ZIP, or a ZIP with one top-level folder."""
    root = Path(root)
    entries = [[path.relative_to(root).as_posix(), file_digest(path)[0]]
               for path in sorted(p for p in root.rglob("*") if p.is_file())]
    return hashlib.sha256(json.dumps(entries, separators=(",", ":")).encode()).hexdigest()
