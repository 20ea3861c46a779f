"""Files under one destination folder, never through a symbolic link and never outside it.

``ceres-pull`` writes what a portal names into a folder the researcher chose. Every path is checked as text
first (``check_path``, ``check_paths``: no empty, ``.`` or ``..`` component, no control character, no name
longer than a file system takes, no two paths that land on the same file or where one needs the other to be a
folder), then opened relative to the destination's open directory, one component at a time with
``O_NOFOLLOW``: a symbolic link anywhere below the destination is refused, not followed, so nothing is read or
written outside it. The destination itself may be a link (the researcher's own choice).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import unicodedata
from collections.abc import Iterable
from pathlib import Path

# Longest file name Linux and the usual object stores accept (the exporter's limits name it too).
MAX_NAME_BYTES = 255
# Longest relative path accepted (Linux's PATH_MAX is 4096 for the whole path, the destination included).
MAX_PATH_BYTES = 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BLOCK = 1 << 20


class UnsafePath(ValueError):
    """A path given as text (a manifest entry) cannot be written safely; the message names it."""


class UnsafeFolder(OSError):
    """The destination holds something in the way: a symbolic link, a file where a folder is needed or a folder
    where a file is; the message names it."""


def check_path(path: object) -> tuple[str, ...]:
    """The components of a relative ``/``-separated path, or ``UnsafePath`` saying what is wrong with it."""
    if not isinstance(path, str) or not path:
        raise UnsafePath(f"a file path is not a non-empty string: {path!r}")
    if any(ord(char) < 32 or ord(char) == 127 for char in path):
        raise UnsafePath(f"file path {path!r} holds a control character")
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePath(f"file path {path!r} is not valid Unicode") from None
    if "\\" in path or path.startswith("/"):
        raise UnsafePath(f"file path {path!r} is absolute or holds a backslash")
    parts = tuple(path.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafePath(f"file path {path!r} has an empty, '.' or '..' component")
    if len(encoded) > MAX_PATH_BYTES:
        raise UnsafePath(f"file path {path[:60]!r}... is {len(encoded)} bytes long, more than {MAX_PATH_BYTES}")
    for part in parts:
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise UnsafePath(f"file path {path[:60]!r}... has a name longer than {MAX_NAME_BYTES} bytes")
    return parts


def check_paths(paths: Iterable[object], *, reserved: Iterable[str] = ()) -> None:
    """Every path is safe (``check_path``), none starts with a ``reserved`` name, no two name the same file (also
    on a file system that ignores case or Unicode normalisation) and no file is another one's folder."""
    reserved = {_key(name) for name in reserved}
    seen: dict[tuple[str, ...], str] = {}
    for path in paths:
        parts = check_path(path)
        if _key(parts[0]) in reserved:
            raise UnsafePath(f"file path {path!r} is inside {parts[0]!r}, which is reserved")
        key = tuple(_key(part) for part in parts)
        if key in seen:
            raise UnsafePath(f"file path {path!r} is listed twice (or as {seen[key]!r})")
        seen[key] = path
    for key, path in seen.items():
        for end in range(1, len(key)):
            if key[:end] in seen:
                raise UnsafePath(f"file path {path!r} needs {seen[key[:end]]!r}, also a file, to be a folder")


def _key(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


class Folder:
    """The destination, open as a directory; every method takes paths relative to it (checked by
    ``check_path``) and refuses symbolic links at every level."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.keep_open = False  # set when threads that may still use the fd are abandoned at exit
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise UnsafeFolder(f"{self.path}: cannot be used as the destination ({exc.strerror})") from None

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc_info) -> None:
        if not self.keep_open:
            self.close()

    def _in_the_way(self, parts: tuple[str, ...], upto: int, wanted: str) -> UnsafeFolder:
        shown = "/".join(parts[:upto + 1])
        try:
            found = os.stat(parts[upto], dir_fd=self._parent(parts[:upto]), follow_symlinks=False)
        except OSError:
            return UnsafeFolder(f"{shown}: cannot be opened in {self.path}")
        if stat.S_ISLNK(found.st_mode):
            return UnsafeFolder(f"{shown}: a symbolic link in {self.path}; ceres-pull never reads or writes "
                                f"through one (remove it)")
        kind = "a folder" if stat.S_ISDIR(found.st_mode) else "a file" if stat.S_ISREG(found.st_mode) \
            else "a special file"
        return UnsafeFolder(f"{shown}: {kind} in {self.path} where {wanted} is needed (remove it)")

    def _parent(self, folders: tuple[str, ...], *, create: bool = False) -> int:
        """An fd of the folder ``folders`` (components) below the destination; the caller closes it unless it
        is the destination's own."""
        fd = self.fd
        for index, name in enumerate(folders):
            try:
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o755, dir_fd=fd)
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if fd != self.fd:
                    os.close(fd)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise self._in_the_way(folders, index, "a folder") from None
                raise
            if fd != self.fd:
                os.close(fd)
            fd = child
        return fd

    def _done(self, fd: int) -> None:
        if fd != self.fd:
            os.close(fd)

    def open(self, path: str, flags: int, *, create_folders: bool = False) -> int:
        """An fd of the file at ``path`` opened with ``flags`` (``O_NOFOLLOW`` added, and ``O_NONBLOCK``: a FIFO
        in the way does not hang the open; it changes nothing for a regular file)."""
        parts = check_path(path)
        parent = self._parent(parts[:-1], create=create_folders)
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise self._in_the_way(parts, len(parts) - 1, "a file") from None
            raise
        finally:
            self._done(parent)

    def size(self, path: str) -> int | None:
        """The length of the regular file at ``path``; None when there is none (nor its folder)."""
        try:
            fd = self.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode):
                raise self._in_the_way(check_path(path), len(check_path(path)) - 1, "a file")
            return found.st_size
        finally:
            os.close(fd)

    def _open_file(self, path: str) -> int | None:
        """A descriptor open for reading on the regular file at ``path``; None when there is none; anything else
        there is named as in the way."""
        try:
            fd = self.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise self._in_the_way(check_path(path), len(check_path(path)) - 1, "a file")
        return fd

    def digest(self, path: str) -> tuple[str, int] | None:
        """SHA-256 (hex) and length of the regular file at ``path``; None when there is none."""
        if (fd := self._open_file(path)) is None:
            return None
        with os.fdopen(fd, "rb") as stream:
            digest, size = hashlib.sha256(), 0
            while block := stream.read(_BLOCK):
                digest.update(block)
                size += len(block)
        return digest.hexdigest(), size

    def read(self, path: str, limit: int) -> bytes | None:
        """The bytes of the file at ``path`` when it holds at most ``limit``; None when it is absent or longer."""
        if (fd := self._open_file(path)) is None:
            return None
        with os.fdopen(fd, "rb") as stream:
            data = stream.read(limit + 1)
        return data if len(data) <= limit else None

    def write(self, path: str, data: bytes) -> None:
        """``path`` holds ``data``, whole or not at all (written beside it, then renamed over it)."""
        parts = check_path(path)
        staged = "/".join((*parts[:-1], f".{parts[-1]}.part"))
        fd = self.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, create_folders=True)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), 0o644)
        self.replace(staged, path)

    def replace(self, source: str, target: str) -> None:
        """Rename ``source`` to ``target`` (its folders made; a symbolic link in the way is refused, a folder
        where the file goes too)."""
        source_parts, target_parts = check_path(source), check_path(target)
        source_fd = self._parent(source_parts[:-1])
        try:
            target_fd = self._parent(target_parts[:-1], create=True)
            try:
                try:
                    found = os.stat(target_parts[-1], dir_fd=target_fd, follow_symlinks=False)
                except FileNotFoundError:
                    found = None
                if found is not None and not stat.S_ISREG(found.st_mode):
                    raise self._in_the_way(target_parts, len(target_parts) - 1, "a file")
                os.replace(source_parts[-1], target_parts[-1], src_dir_fd=source_fd, dst_dir_fd=target_fd)
            finally:
                self._done(target_fd)
        finally:
            self._done(source_fd)

    def unlink(self, path: str) -> None:
        parts = check_path(path)
        try:
            parent = self._parent(parts[:-1])
        except FileNotFoundError:
            return
        try:
            os.unlink(parts[-1], dir_fd=parent)
        except FileNotFoundError:
            pass
        finally:
            self._done(parent)

    def remove_tree(self, name: str) -> None:
        """Remove the folder ``name`` (one component) and everything in it, following no link."""
        check_path(name)
        try:
            found = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(found.st_mode):
            raise self._in_the_way((name,), 0, "a folder")
        # Bottom up through descriptors (``shutil.rmtree`` takes ``dir_fd`` only from Python 3.11 on): each entry
        # removed from its open folder; a link is removed as the entry it is, never followed.
        for _root, folders, files, root_fd in os.fwalk(name, topdown=False, dir_fd=self.fd):
            for entry in files:
                os.unlink(entry, dir_fd=root_fd)
            for entry in folders:
                try:
                    os.rmdir(entry, dir_fd=root_fd)
                except NotADirectoryError:  # a link to a folder
                    os.unlink(entry, dir_fd=root_fd)
        os.rmdir(name, dir_fd=self.fd)
