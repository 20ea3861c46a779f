"""Object helpers over Django's storage API, so one code path serves local folders and S3.

On S3 a PUT replaces an object whole and at once (the storages are configured ``file_overwrite=True``, so a save
asks nothing first); local folders rename a second file instead of replacing it, so there ``put`` deletes an
existing one first. Either way ``put`` insists the stored name is the one asked for. Listing a prefix on S3 is one
paginated listing, not one request per folder.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
import io
import mimetypes
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError
from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import InterfaceError, OperationalError
from django.utils.crypto import salted_hmac

from exporter.receipt import bytes_digest, stream_digest

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


def checksums(storage: Storage, name: str, *, copy_to: IO[bytes] | None = None) -> dict:
    """Read a stored object once, streamed: its SHA-256, MD5 (hex) and length, and the ETag the store served the
    bytes with (``""`` on local folders, which have none); ``copy_to`` also gets the bytes. What the verification
    job keeps of each shard object, so that a release may copy it without reading it again (``copy``)."""
    whole, md5, length, etag = hashlib.sha256(), _md5(), 0, ""
    if _is_s3(storage):
        try:
            response = storage.bucket.meta.client.get_object(Bucket=storage.bucket_name, Key=name)
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                raise FileNotFoundError(f"no object {name}") from None
            raise
        body, etag = response["Body"], _etag(response["ETag"])
        context = _closing(body)
    else:
        context = storage.open(name, "rb")
    with context as source:
        while block := source.read(CHUNK):
            length += len(block)
            whole.update(block)
            md5.update(block)
            if copy_to is not None:
                copy_to.write(block)
    return {"sha256": whole.hexdigest(), "md5": md5.hexdigest(), "size": length, "etag": etag}


@contextmanager
def _closing(body):
    try:
        yield body
    finally:
        body.close()


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
    a copy that does not match is deleted and ``ObjectMismatch`` raised. Small bytes on S3 (a card file, a manifest)
    are checked against the receipt here and stored with their ``Content-MD5``, the stored object's ETag checked
    against it instead of read back (``copy`` explains why the ETag proves the bytes)."""
    data = getattr(content, "file", None)
    if _is_s3(storage) and size <= INLINE_BYTES and isinstance(getattr(data, "getvalue", None), Callable):
        raw = data.getvalue()
        if bytes_digest(raw) != (sha256, size):
            raise ObjectMismatch(f"{name}: the bytes to store do not match their receipt")
        md5 = _md5()
        md5.update(raw)
        content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"  # as django-storages sets it
        if put_object(storage.bucket.meta.client, storage.bucket_name, name, raw, md5.digest(), content_type) \
                != md5.hexdigest():
            storage.delete(name)
            raise ObjectMismatch(f"{name}: the stored copy does not match its receipt")
        return
    put(storage, name, content)
    if not matches(storage, name, sha256, size):
        storage.delete(name)
        raise ObjectMismatch(f"{name}: the stored copy does not match its receipt")


def read_checked(storage: Storage, name: str, sha256: str, size: int) -> bytes:
    """A small object's bytes, read once and checked against ``sha256`` and ``size`` (``ObjectMismatch``)."""
    held = io.BytesIO()
    seen = checksums(storage, name, copy_to=held)
    if (seen["sha256"], seen["size"]) != (sha256, size):
        raise ObjectMismatch(f"{name}: the stored object does not match its receipt")
    return held.getvalue()


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


class SourceMismatch(ObjectMismatch):
    """The object to copy does not match its receipt (the copy was not made, or was removed)."""


def copy(source: Storage, source_name: str, target: Storage, name: str, sha256: str, size: int, *,
         maybe_present: bool = True, verified_md5: str | None = None,
         keep: Callable[[bytes], object] | None = None) -> bool:
    """Place under ``name`` in ``target`` an object proven byte-identical to ``source_name`` in ``source`` and to its
    receipt (``sha256``, ``size``), moving the bytes as little as the storages allow; whether it was found in
    place already (``maybe_present``: look before copying). ``SourceMismatch`` when the source does not match its
    receipt, ``ObjectMismatch`` (the copy deleted) when the copy does not match; ``FileNotFoundError`` when the
    source is gone.

    - Both S3 on one endpoint: the source is read once, its SHA-256 checked against the receipt and its MD5 taken
      on the way; the gateway copies it (``CopyObject``; above ``CERES_S3_COPY_PART_BYTES`` or for a source stored
      in parts, a multipart upload of ``UploadPartCopy`` parts), a single-part source only if it is still the
      object read (``x-amz-copy-source-if-match``); an object of at most ``INLINE_BYTES`` is stored from the bytes
      read instead (a PUT with their ``Content-MD5``). The copy's ETag, which the store computes from the bytes it
      wrote, must be the MD5 of the checked bytes (of each part, for a multipart copy). Nothing is read back.
    - Both S3 on one endpoint, with ``verified_md5``: the MD5 the verification job took of the source's bytes in
      the read that checked them against this receipt, when the store's ETag of the source was then that MD5 (a
      single-part object; ``verified_copy``). The source is not read: the gateway copies it only if its ETag is
      still that MD5 (``x-amz-copy-source-if-match``; otherwise ``SourceMismatch``, nothing copied), and the copy's
      ETag must be it too. A source larger than ``CERES_S3_COPY_PART_BYTES``, or of at most
      ``CERES_S3_VERIFIED_COPY_MIN_BYTES`` (1 MiB: on Swift a read and a PUT are quicker there), takes the path
      above.
    - Local folders: a hard link (a reflink, or a copy, where the file system refuses one), then the placed
      file hashed once against the receipt.
    - Anything else: fetched to a scratch file, checked, stored and read back (``put_checked``).

    ``keep``, when given, is handed the source's bytes, checked against the receipt, if the copy read them whole
    (an object of at most ``INLINE_BYTES`` on S3): a caller that needs them need not read them again.
    """
    if _is_s3(source) and _is_s3(target) and _same_service(source, target):
        if verified_md5 and settings.CERES_S3_VERIFIED_COPY_MIN_BYTES < size <= settings.CERES_S3_COPY_PART_BYTES:
            return _copy_s3_verified(source, source_name, target, name, size, _etag(verified_md5),
                                     maybe_present=maybe_present)
        return _copy_s3(source, source_name, target, name, sha256, size, maybe_present=maybe_present, keep=keep)
    if hasattr(source, "path") and hasattr(target, "path") and not _is_s3(source) and not _is_s3(target):
        return _copy_local(source, source_name, target, name, sha256, size, maybe_present=maybe_present)
    return _transfer(source, source_name, target, name, sha256, size, maybe_present=maybe_present)


def _same_service(a: Storage, b: Storage) -> bool:
    """Two S3 storages one copy request can join: the same endpoint, region and credentials."""
    return all(getattr(a, key, None) == getattr(b, key, None)
               for key in ("endpoint_url", "region_name", "access_key", "secret_key"))


def _transfer(source, source_name, target, name, sha256, size, *, maybe_present) -> bool:
    import tempfile

    if maybe_present and matches(target, name, sha256, size):
        return True
    with tempfile.TemporaryDirectory(prefix="ceres-copy-") as scratch:
        local = Path(scratch) / "object"
        try:
            fetch_checked(source, source_name, local, sha256, size)
        except ObjectMismatch as exc:
            raise SourceMismatch(str(exc)) from None
        put_checked(target, name, local, sha256, size)
    return False


def _etag(value: str) -> str:
    return value.strip('"').lower()


def _md5():
    return hashlib.md5(usedforsecurity=False)  # what S3 ETags are made of; the proof's SHA-256 is the receipt's


def _multipart_etag(part_md5s: list[bytes]) -> str:
    """The ETag S3 gives an object completed from these parts: the MD5 of their MD5s, a dash, their count."""
    joined = _md5()
    joined.update(b"".join(part_md5s))
    return f"{joined.hexdigest()}-{len(part_md5s)}"


def _read_source(source: Storage, source_name: str, sha256: str, size: int, part_bytes: int, *, keep: bool = False) \
        -> tuple[str, list[bytes], dict]:
    """Read the source once: its ETag, the MD5 of each ``part_bytes`` part of its bytes (one part for an object
    no larger) and (``keep``) the bytes themselves and its content type; ``SourceMismatch`` unless its SHA-256 and
    length are the receipt's (and, stored in one part and read in one, its ETag is its bytes' MD5)."""
    client = source.bucket.meta.client
    try:
        response = client.get_object(Bucket=source.bucket_name, Key=source_name)
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            raise FileNotFoundError(f"no object {source_name}") from None
        raise
    body, etag = response["Body"], _etag(response["ETag"])
    whole, part, parts, filled, length, kept = hashlib.sha256(), _md5(), [], 0, 0, []
    try:
        while block := body.read(CHUNK):
            if keep:
                kept.append(block)
            length += len(block)
            whole.update(block)
            view = memoryview(block)
            while view:
                take = view[:part_bytes - filled]
                part.update(take)
                filled += len(take)
                view = view[len(take):]
                if filled == part_bytes:
                    parts.append(part.digest())
                    part, filled = _md5(), 0
    finally:
        body.close()
    if filled or not parts:
        parts.append(part.digest())
    if (whole.hexdigest(), length) != (sha256, size) or (len(parts) == 1 and "-" not in etag
                                                         and etag != parts[0].hex()):
        raise SourceMismatch(f"{source_name}: the stored object does not match its receipt")
    return etag, parts, {"data": b"".join(kept), "content_type": response.get("ContentType")} if keep else {}


# Objects no larger than this are stored from the bytes just read and checked (a PUT with their MD5, which the
# gateway checks) instead of copied: a server-side copy costs Swift a look-up, a GET and a PUT of its own, more than
# the PUT of a small object (bench/release.py; docs/releases.md).
INLINE_BYTES = 1 << 20


def _copy_s3(source, source_name, target, name, sha256, size, *, maybe_present, keep=None) -> bool:
    part_bytes = settings.CERES_S3_COPY_PART_BYTES
    inline = size <= INLINE_BYTES
    etag, parts, read = _read_source(source, source_name, sha256, size, part_bytes, keep=inline)
    if inline and keep is not None:
        keep(read["data"])
    # A source stored in parts is copied in parts too: copying it whole, a gateway may give the copy the source's
    # ETag (Swift does) rather than one made from the bytes it wrote, and that would vouch for nothing.
    multipart = not inline and size > 0 and (size > part_bytes or "-" in etag)
    expected = _multipart_etag(parts) if multipart else parts[0].hex()
    client = target.bucket.meta.client
    if maybe_present and _in_place(client, target.bucket_name, name, size, expected):
        return True
    copied_from = {"Bucket": source.bucket_name, "Key": source_name}
    try:
        if inline:
            placed = put_object(client, target.bucket_name, name, read["data"], parts[0], read["content_type"])
        elif multipart:
            placed = copy_parts(client, copied_from, etag, target.bucket_name, name, size, part_bytes, parts)
        else:
            placed = copy_object(client, copied_from, etag, target.bucket_name, name)
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412:
            raise SourceMismatch(f"{source_name}: the stored object changed while it was copied") from None
        raise
    if placed != expected:
        target.delete(name)
        raise ObjectMismatch(f"{name}: the copy does not match its receipt (ETag {placed}, not {expected})")
    return False


def _in_place(client, bucket: str, name: str, size: int, etag: str) -> bool:
    """Whether ``name`` is stored already with this length and ETag (a ``HEAD``; absent is False)."""
    try:
        head = client.head_object(Bucket=bucket, Key=name)
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 404:
            raise
        return False
    return head["ContentLength"] == size and _etag(head["ETag"]) == etag


SEAL_SALT = "ceres.storage.verified-checksums"


def _seal(name: str, seen: dict) -> str:
    message = "\n".join(str(part) for part in (name, seen.get("sha256"), seen.get("md5"), seen.get("size"),
                                               seen.get("etag")))
    return salted_hmac(SEAL_SALT, message, algorithm="sha256").hexdigest()


def seal(name: str, seen: dict) -> dict:
    """What ``checksums`` read of the object ``name``, with its seal: an HMAC under the portal's secret key (never
    in the database) of the name and of what was read. The verification job keeps it so; a release trusts a recorded
    MD5 only under a seal that matches (``verified_copy``), so that someone who can write the database cannot make
    a release copy, unread, an object whose MD5 the verification job never took."""
    return {**seen, "seal": _seal(name, seen)}


def verified_copy(seen: dict | None, sha256: str, size: int, *, name: str) -> str | None:
    """The MD5 a release may copy the object ``name`` by without reading it (``copy``'s ``verified_md5``): the one
    the verification job recorded (``checksums``, ``seal``) when the bytes it read were these (``sha256``,
    ``size``: the frozen receipt's) and the store's ETag was their MD5 (a single-part object), under a seal that
    matches; None otherwise (the object is then read and checked)."""
    if not seen or seen.get("sha256") != sha256 or seen.get("size") != size:
        return None
    if not hmac.compare_digest(str(seen.get("seal", "")), _seal(name, seen)):
        return None
    md5, etag = str(seen.get("md5", "")).lower(), _etag(str(seen.get("etag", "")))
    return md5 if re.fullmatch(r"[0-9a-f]{32}", md5) and etag == md5 else None


def _copy_s3_verified(source, source_name, target, name, size, md5, *, maybe_present) -> bool:
    """``copy`` of a source whose bytes the verification job checked and MD5-summed: no read of the source."""
    client = target.bucket.meta.client
    if maybe_present and _in_place(client, target.bucket_name, name, size, md5):
        return True
    try:
        placed = copy_object(client, {"Bucket": source.bucket_name, "Key": source_name}, md5, target.bucket_name,
                             name)
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 412:
            raise SourceMismatch(f"{source_name}: the stored object is not the one verified against its receipt "
                                 f"(its ETag is no longer {md5}, the MD5 of the bytes verification checked); "
                                 f"not copied") from None
        if status == 404:
            raise FileNotFoundError(f"no object {source_name}") from None
        raise
    if placed != md5:
        target.delete(name)
        raise ObjectMismatch(f"{name}: the copy does not match its receipt (ETag {placed}, not {md5})")
    return False


def put_object(client, bucket: str, name: str, data: bytes, md5: bytes, content_type: str | None) -> str:
    """One PUT of bytes already checked, with their MD5 (``Content-MD5``: the gateway refuses bytes that arrive
    otherwise); the stored object's ETag."""
    import base64

    extra = {"ContentType": content_type} if content_type else {}
    result = client.put_object(Bucket=bucket, Key=name, Body=data, ContentMD5=base64.b64encode(md5).decode(),
                               **extra)
    return _etag(result["ETag"])


def copy_object(client, copied_from: dict, etag: str, bucket: str, name: str) -> str:
    """One server-side copy of the single-part object read with ``etag`` (refused with 412 if it is another
    now); the copy's ETag."""
    result = client.copy_object(Bucket=bucket, Key=name, CopySource=copied_from, CopySourceIfMatch=f'"{etag}"',
                                MetadataDirective="COPY")
    return _etag(result["CopyObjectResult"]["ETag"])


def copy_parts(client, copied_from: dict, etag: str, bucket: str, name: str, size: int, part_bytes: int,
               part_md5s: list[bytes]) -> str:
    """A server-side multipart copy in ``part_bytes`` parts, each part's ETag (the MD5 of the bytes the store
    wrote) checked against the MD5 of those bytes as read; the completed object's ETag. Until it completes no
    object exists under ``name``; a failure aborts the upload (one killed stays an unfinished upload, which is
    no object; an S3 lifecycle rule ``AbortIncompleteMultipartUpload`` clears such leftovers)."""
    head = client.head_object(Bucket=copied_from["Bucket"], Key=copied_from["Key"], IfMatch=f'"{etag}"')
    upload = client.create_multipart_upload(Bucket=bucket, Key=name,
                                            ContentType=head.get("ContentType", "application/octet-stream"),
                                            Metadata=head.get("Metadata", {}))["UploadId"]
    try:
        done = []
        for number, start in enumerate(range(0, size, part_bytes), start=1):
            end = min(start + part_bytes, size) - 1
            # No copy-source-if-match here: Swift refuses it for a source stored in parts. The part's ETag is
            # the proof: a source changed since it was read gives parts that do not match.
            result = client.upload_part_copy(Bucket=bucket, Key=name, UploadId=upload, PartNumber=number,
                                             CopySource=copied_from, CopySourceRange=f"bytes={start}-{end}")
            part_etag = _etag(result["CopyPartResult"]["ETag"])
            if part_etag != part_md5s[number - 1].hex():
                raise ObjectMismatch(f"{name}: part {number} of the copy does not match the bytes checked")
            done.append({"PartNumber": number, "ETag": f'"{part_etag}"'})
        result = client.complete_multipart_upload(Bucket=bucket, Key=name, UploadId=upload,
                                                  MultipartUpload={"Parts": done})
    except BaseException:
        client.abort_multipart_upload(Bucket=bucket, Key=name, UploadId=upload)
        raise
    return _etag(result["ETag"])


FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


def _copy_local(source, source_name, target, name, sha256, size, *, maybe_present) -> bool:
    origin, placed = Path(source.path(source_name)), Path(target.path(name))
    if not origin.is_file():
        raise FileNotFoundError(f"no object {source_name}")
    if placed.is_file():
        if maybe_present and matches(target, name, sha256, size):
            return True
        target.delete(name)
    placed.parent.mkdir(parents=True, exist_ok=True)
    place_file(origin, placed)
    # A hard link is the source's own file: hashing it checks the source and the placed object in one read.
    if matches(target, name, sha256, size):
        return False
    target.delete(name)
    if not matches(source, source_name, sha256, size):
        raise SourceMismatch(f"{source_name}: the stored object does not match its receipt")
    raise ObjectMismatch(f"{name}: the copy does not match its receipt")


def place_file(origin: Path, placed: Path) -> str:
    """``origin`` at ``placed`` (absent): a hard link where the file system allows one, else a reflink (btrfs,
    XFS), else a copy; which it was."""
    try:
        os.link(origin, placed)
        return "link"
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
            raise
    with origin.open("rb") as reading, placed.open("xb") as writing:
        try:
            fcntl.ioctl(writing.fileno(), FICLONE, reading.fileno())
            return "reflink"
        except OSError:
            shutil.copyfileobj(reading, writing, CHUNK)
            return "copy"


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
