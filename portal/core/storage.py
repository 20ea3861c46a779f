"""Object helpers over Django's storage API, so one code path serves local folders and S3.

On S3 a PUT replaces an object whole and at once (the storages are configured ``file_overwrite=True``, so a save
asks nothing first); local folders rename a second file instead of replacing it, so there ``put`` deletes an
existing one first. Either way ``put`` insists the stored name is the one asked for. Listing a prefix on S3 is one
paginated listing, not one request per folder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import InterfaceError, OperationalError

from exporter.receipt import stream_digest

CHUNK = 1 << 20

# Errors after which the same operation may succeed later: the S3 gateway or the database is down or overloaded.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, HTTPClientError, ConnectionRefusedError,
                                                     TimeoutError, OperationalError, InterfaceError)


def is_transient(exc: BaseException) -> bool:
    """A failure that may pass by itself: the S3 gateway or the database down or overloaded (a database
    restart, a lost connection, SQLite busy, a deadlock or serialisation failure on PostgreSQL)."""
    if isinstance(exc, TRANSIENT_ERRORS):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return status >= 500 or status in (408, 429)
    return False


def captures() -> Storage:
    return storages["captures"]


def shards() -> Storage:
    return storages["shards"]


def releases() -> Storage:
    return storages["releases"]


def _is_s3(storage: Storage) -> bool:
    return hasattr(storage, "bucket")  # django-storages' S3 storage has one; FileSystemStorage has not


def walk(storage: Storage, prefix: str) -> list[str]:
    """Every object name under ``prefix`` (a folder path ending in '/'), sorted."""
    prefix = prefix.rstrip("/")
    if _is_s3(storage):
        return sorted(obj.key for obj in storage.bucket.objects.filter(Prefix=f"{prefix}/"))
    try:
        folders, files = storage.listdir(prefix)
    except FileNotFoundError:
        return []
    names = [f"{prefix}/{name}" for name in files]
    for folder in folders:
        names.extend(walk(storage, f"{prefix}/{folder}"))
    return sorted(names)


def delete_prefix(storage: Storage, prefix: str) -> int:
    """Delete every object under ``prefix``, one request each (S3's batched DeleteObjects needs a Content-MD5
    header that boto3 no longer sends, and not every gateway takes its CRC32 instead)."""
    names = walk(storage, prefix)
    for name in names:
        storage.delete(name)
    return len(names)


def put(storage: Storage, name: str, content: IO[bytes] | Path) -> str:
    """Store ``content`` (streamed, never read whole) under exactly ``name``, replacing what was there."""
    if not getattr(storage, "file_overwrite", False) and storage.exists(name):
        storage.delete(name)
    if isinstance(content, Path):
        with content.open("rb") as stream:
            stored = storage.save(name, File(stream, name=name))
    else:
        stored = storage.save(name, File(content, name=name))
    if stored != name:
        storage.delete(stored)
        raise RuntimeError(f"storage stored {name!r} as {stored!r}")
    return stored


def fetch(storage: Storage, name: str, target: Path, *, max_bytes: int | None = None) -> int:
    """Copy an object to a local file, streamed; refuses objects larger than ``max_bytes``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    copied = 0
    with stream(storage, name) as source, target.open("wb") as out:
        while block := source.read(CHUNK):
            copied += len(block)
            if max_bytes is not None and copied > max_bytes:
                raise ValueError(f"{name} is larger than the limit of {max_bytes} bytes")
            out.write(block)
    return copied


@contextmanager
def stream(storage: Storage, name: str) -> Iterator[IO[bytes]]:
    """A stored object as a binary stream read as it arrives: on S3 the GET response's body (django-storages'
    ``open`` first downloads the whole object into a spooled temporary file, held in memory unless
    ``AWS_S3_MAX_MEMORY_SIZE`` is set), the file itself on local folders. ``FileNotFoundError`` when absent."""
    if _is_s3(storage):
        try:
            body = storage.bucket.Object(name).get()["Body"]
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                raise FileNotFoundError(f"no object {name}") from None
            raise
        try:
            yield body
        finally:
            body.close()
        return
    with storage.open(name, "rb") as source:
        yield source


def digest(storage: Storage, name: str) -> tuple[str, int]:
    """SHA-256 (hex) and length of a stored object, streamed from the storage (never held whole)."""
    with stream(storage, name) as source:
        return stream_digest(source)


def matches(storage: Storage, name: str, sha256: str, size: int) -> bool:
    """Whether ``name`` is stored with this SHA-256 and length (read back from the storage); False when absent."""
    try:
        return digest(storage, name) == (sha256, size)
    except FileNotFoundError:
        return False


class ObjectMismatch(Exception):
    """A stored object does not match its receipt or manifest. Not transient: the job fails visibly and a
    person retries it once the cause is fixed."""


def put_checked(storage: Storage, name: str, content: IO[bytes] | Path, sha256: str, size: int) -> None:
    """Store ``content`` under ``name`` and check the stored object, read back, against ``sha256`` and ``size``;
    a copy that does not match is deleted and ``ObjectMismatch`` raised."""
    put(storage, name, content)
    if not matches(storage, name, sha256, size):
        storage.delete(name)
        raise ObjectMismatch(f"{name}: the stored copy does not match its receipt")


def fetch_checked(storage: Storage, name: str, target: Path, sha256: str, size: int) -> Path:
    """Copy an object to a local file, hashing it on the way (one read), and check it against ``sha256`` and
    ``size``; ``ObjectMismatch`` naming the object when it does not match."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with stream(storage, name) as source, target.open("wb") as out:
        copied = stream_digest(source, copy_to=out)
    if copied != (sha256, size):
        target.unlink(missing_ok=True)
        raise ObjectMismatch(f"{name}: the stored object does not match its receipt")
    return target


def presigned_url(storage: Storage, name: str, *, filename: str, seconds: int) -> str | None:
    """A GET link to ``name`` that S3 itself checks and lets expire after ``seconds`` (the response names the
    file as ``filename`` to save); None for local folders, which have no such links (the portal signs its own)."""
    if not _is_s3(storage):
        return None
    return storage.url(name, parameters={"ResponseContentDisposition": f'attachment; filename="{filename}"'},
                       expire=seconds)


_BYTE_RANGE = re.compile(r"(\d*)-(\d*)")


def requested_span(header: str, size: int) -> tuple[tuple[int, int] | None, bool]:
    """What to serve of an object of ``size`` bytes for an HTTP ``Range`` header, read as RFC 9110 says: the span
    (first and last byte, inclusive; None when the range cannot be satisfied: answer 416) and whether it is a
    range the server honours (206) rather than the whole object (200). The unit is case-insensitive; a suffix
    longer than the object is the whole object; a header that is not one valid ``bytes`` range (another unit,
    several ranges, a last byte before the first) is ignored, and the whole object served."""
    whole = ((0, size - 1), False)
    unit, equals, spec = header.partition("=")
    if not equals or unit.strip().lower() != "bytes":
        return whole
    match = _BYTE_RANGE.fullmatch(spec.strip())
    if match is None or match[0] == "-":
        return whole
    first, last = match.groups()
    if first == "":  # the last N bytes
        count = int(last)
        return ((max(0, size - count), size - 1), True) if count > 0 and size > 0 else (None, True)
    start = int(first)
    if last and int(last) < start:
        return whole
    end = min(int(last), size - 1) if last else size - 1
    return ((start, end), True) if start < size else (None, True)


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """The span (first and last byte, inclusive) to serve for an HTTP ``Range`` header (``requested_span``)."""
    return requested_span(header, size)[0]


def read_range(storage: Storage, name: str, start: int, end: int) -> Iterator[bytes]:
    """Stream bytes ``start`` to ``end`` (inclusive) of a stored object without reading the rest: a ranged GET
    on S3, a seek on local folders."""
    if _is_s3(storage):
        body = storage.bucket.Object(name).get(Range=f"bytes={start}-{end}")["Body"]
        yield from body.iter_chunks(CHUNK)
        return
    left = end - start + 1
    with storage.open(name, "rb") as source:
        source.seek(start)
        while left > 0 and (block := source.read(min(CHUNK, left))):
            left -= len(block)
            yield block
