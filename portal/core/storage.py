"""Object helpers over Django's storage API, so one code path serves local folders and S3.

Both backends refuse to overwrite (``file_overwrite=False`` renames instead), so ``put`` deletes an
existing object first and insists the stored name is the one asked for.
"""

from __future__ import annotations

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
