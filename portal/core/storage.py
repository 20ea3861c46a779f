"""Object helpers over Django's storage API, so one code path serves local folders and S3.

Both backends refuse to overwrite (``file_overwrite=False`` renames instead), so ``put`` deletes an
existing object first and insists the stored name is the one asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError
from django.core.files import File
from django.core.files.storage import Storage, storages

from exporter.receipt import stream_digest

CHUNK = 1 << 20

# Errors after which the same operation may succeed later: the S3 gateway is down or overloaded.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, HTTPClientError, ConnectionRefusedError,
                                                     TimeoutError)


def is_transient(exc: BaseException) -> bool:
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


def walk(storage: Storage, prefix: str) -> list[str]:
    """Every object name under ``prefix`` (a folder path ending in '/'), sorted."""
    prefix = prefix.rstrip("/")
    try:
        folders, files = storage.listdir(prefix)
    except FileNotFoundError:
        return []
    names = [f"{prefix}/{name}" for name in files]
    for folder in folders:
        names.extend(walk(storage, f"{prefix}/{folder}"))
    return sorted(names)


def delete_prefix(storage: Storage, prefix: str) -> int:
    names = walk(storage, prefix)
    for name in names:
        storage.delete(name)
    return len(names)


def put(storage: Storage, name: str, content: IO[bytes] | Path) -> str:
    """Store ``content`` (streamed, never read whole) under exactly ``name``, replacing what was there."""
    if storage.exists(name):
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
    with storage.open(name, "rb") as source, target.open("wb") as out:
        while block := source.read(CHUNK):
            copied += len(block)
            if max_bytes is not None and copied > max_bytes:
                raise ValueError(f"{name} is larger than the limit of {max_bytes} bytes")
            out.write(block)
    return copied


def digest(storage: Storage, name: str) -> tuple[str, int]:
    """SHA-256 (hex) and length of a stored object, streamed from the storage."""
    with storage.open(name, "rb") as source:
        return stream_digest(source)


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """The span (first and last byte, inclusive) an HTTP ``Range`` header asks of an object of ``size`` bytes:
    the whole object when there is no header or it is not one ``bytes`` range (serving it all is allowed);
    None when the range cannot be satisfied (answer 416)."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec or "-" not in spec:
        return (0, size - 1)
    first, _, last = spec.strip().partition("-")
    try:
        if first == "":  # the last N bytes
            count = int(last)
            return (max(0, size - count), size - 1) if count > 0 and size > 0 else None
        start = int(first)
        end = min(int(last), size - 1) if last else size - 1
    except ValueError:
        return (0, size - 1)
    return (start, end) if 0 <= start <= end else None


def read_range(storage: Storage, name: str, start: int, end: int) -> Iterator[bytes]:
    """Stream bytes ``start`` to ``end`` (inclusive) of a stored object without reading the rest: a ranged GET
    on S3, a seek on local folders."""
    if hasattr(storage, "bucket"):  # django-storages' S3 storage
        body = storage.bucket.Object(name).get(Range=f"bytes={start}-{end}")["Body"]
        yield from body.iter_chunks(CHUNK)
        return
    left = end - start + 1
    with storage.open(name, "rb") as source:
        source.seek(start)
        while left > 0 and (block := source.read(min(CHUNK, left))):
            left -= len(block)
            yield block
