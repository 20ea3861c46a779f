"""``storage.copy``: an object placed in another storage, proven byte-identical to its source and receipt while
moving the bytes as little as the storages allow. Local folders: a hard link (a reflink or a copy where the file
system refuses one) hashed once. S3 on one endpoint (``-m s3``, the gateway): the source read once and copied by
the gateway (``CopyObject``, in parts by ``UploadPartCopy`` above ``CERES_S3_COPY_PART_BYTES`` or for a source
stored in parts), the copy's ETag checked against the MD5 of the bytes checked, never read back."""

from __future__ import annotations

import errno
import hashlib
import os
import uuid

import pytest
from botocore.exceptions import ClientError
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from portal.core import storage
from portal.core.storage import ObjectMismatch, SourceMismatch


def md5(data: bytes):
    return hashlib.md5(data, usedforsecurity=False)


def digest_of(data: bytes) -> tuple[str, int]:
    return hashlib.sha256(data).hexdigest(), len(data)


@pytest.fixture
def local(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, **{name: {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path / name)}} for name in ("shards", "releases")}}
    return storages["shards"], storages["releases"]


def test_local_folders_get_a_hard_link_hashed_once_and_found_in_place_after(local):
    shards, releases = local
    data = os.urandom(300_000)
    shards.save("demo/episode-000000/data.bin", ContentFile(data))
    assert storage.copy(shards, "demo/episode-000000/data.bin", releases, "r/episode-000000/data.bin",
                        *digest_of(data)) is False
    placed, origin = releases.path("r/episode-000000/data.bin"), shards.path("demo/episode-000000/data.bin")
    assert os.path.samefile(placed, origin)  # the shard's own file: no byte copied
    assert storage.copy(shards, "demo/episode-000000/data.bin", releases, "r/episode-000000/data.bin",
                        *digest_of(data)) is True


def test_local_folders_fall_back_to_a_copy_where_no_link_can_be_made(local, monkeypatch):
    shards, releases = local
    data = os.urandom(200_000)
    shards.save("s/object", ContentFile(data))

    def cross_device(*args):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    assert storage.copy(shards, "s/object", releases, "r/object", *digest_of(data)) is False
    assert not os.path.samefile(releases.path("r/object"), shards.path("s/object"))
    assert storage.digest(releases, "r/object") == digest_of(data)


def test_local_source_that_does_not_match_its_receipt_is_refused_and_nothing_stays(local):
    shards, releases = local
    shards.save("s/object", ContentFile(b"tampered"))
    with pytest.raises(SourceMismatch, match="s/object: the stored object does not match its receipt"):
        storage.copy(shards, "s/object", releases, "r/object", *digest_of(b"original"))
    assert not releases.exists("r/object")
    with pytest.raises(FileNotFoundError):
        storage.copy(shards, "s/absent", releases, "r/absent", *digest_of(b"x"))


def test_a_stale_object_in_place_is_replaced(local):
    shards, releases = local
    data = b"the shard's bytes" * 1000
    shards.save("s/object", ContentFile(data))
    releases.save("r/object", ContentFile(b"half written"))
    assert storage.copy(shards, "s/object", releases, "r/object", *digest_of(data)) is False
    assert storage.digest(releases, "r/object") == digest_of(data)


@pytest.fixture
def s3(settings):
    if settings.STORAGE_BACKEND != "s3":
        pytest.skip("needs the S3 gateway: CERES_STORAGE=s3 and infra/swift/start.sh")
    shards, releases = storages["shards"], storages["releases"]
    prefix = f"copy-test-{uuid.uuid4().hex[:12]}/"
    yield shards, releases, prefix
    for stored in (shards, releases):
        storage.delete_prefix(stored, prefix)


def etag(stored, name: str) -> str:
    return stored.bucket.meta.client.head_object(Bucket=stored.bucket_name, Key=name)["ETag"].strip('"')


def no_read_back(monkeypatch):
    """Fail if the copy is read back: the gateway's ETag is the proof."""
    def refused(*args, **kwargs):
        raise AssertionError("the copy was read back")

    for name in ("digest", "matches", "stream", "fetch"):
        monkeypatch.setattr(storage, name, refused)


@pytest.mark.s3
@pytest.mark.parametrize("size", [1_500_000, 20_000])
def test_s3_copies_on_the_gateway_checks_the_etag_and_never_reads_the_copy_back(s3, monkeypatch, size):
    """Above ``INLINE_BYTES`` a ``CopyObject``; a small object is stored from the bytes read (with their MD5)."""
    shards, releases, prefix = s3
    data = os.urandom(size)
    storage.put(shards, prefix + "object", ContentFile(data))
    with monkeypatch.context() as patched:
        no_read_back(patched)
        assert storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data)) is False
        assert storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data)) is True
    assert etag(releases, prefix + "copy") == md5(data).hexdigest()
    assert storage.digest(releases, prefix + "copy") == digest_of(data)


@pytest.mark.s3
@pytest.mark.parametrize("stored_in_parts", [False, True])
def test_s3_copies_large_objects_in_parts_each_checked(s3, settings, monkeypatch, stored_in_parts):
    shards, releases, prefix = s3
    settings.CERES_S3_COPY_PART_BYTES = 5 * 1024 * 1024
    data = os.urandom(12 * 1024 * 1024)
    client = shards.bucket.meta.client
    if stored_in_parts:  # as django-storages stores a large object: boto3's transfer manager, 8 MiB parts
        storage.put(shards, prefix + "object", ContentFile(data))
        assert etag(shards, prefix + "object").endswith("-2")
    else:
        client.put_object(Bucket=shards.bucket_name, Key=prefix + "object", Body=data)
    with monkeypatch.context() as patched:
        no_read_back(patched)
        assert storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data)) is False
        assert storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data)) is True
    assert etag(releases, prefix + "copy").endswith("-3")
    assert storage.digest(releases, prefix + "copy") == digest_of(data)


@pytest.mark.s3
def test_s3_copies_a_small_object_stored_in_parts_in_parts(s3, settings):
    """Swift gives a whole copy of an object stored in parts the source's ETag, which vouches for nothing: such a
    source is always copied by parts, whose ETags the gateway makes from the bytes it writes."""
    shards, releases, prefix = s3
    data = os.urandom(10 * 1024 * 1024)
    storage.put(shards, prefix + "object", ContentFile(data))
    assert etag(shards, prefix + "object").endswith("-2")
    assert storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data)) is False
    assert etag(releases, prefix + "copy") == storage._multipart_etag([md5(data).digest()])


@pytest.mark.s3
def test_s3_source_that_does_not_match_its_receipt_is_refused_and_nothing_is_copied(s3):
    shards, releases, prefix = s3
    storage.put(shards, prefix + "object", ContentFile(b"tampered"))
    with pytest.raises(SourceMismatch, match="does not match its receipt"):
        storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(b"original"))
    assert storage.walk(releases, prefix) == []
    with pytest.raises(FileNotFoundError):
        storage.copy(shards, prefix + "absent", releases, prefix + "copy", *digest_of(b"x"))


@pytest.mark.s3
def test_s3_source_replaced_after_it_was_read_is_not_copied(s3, monkeypatch):
    shards, releases, prefix = s3
    data = b"checked bytes" * 100_000
    storage.put(shards, prefix + "object", ContentFile(data))
    read = storage._read_source

    def replaced_after_reading(*args, **kwargs):
        found = read(*args, **kwargs)
        storage.put(shards, prefix + "object", ContentFile(b"other bytes" * 100_000))
        return found

    monkeypatch.setattr(storage, "_read_source", replaced_after_reading)
    with pytest.raises(SourceMismatch, match="changed while it was copied"):
        storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data))
    assert storage.walk(releases, prefix) == []


@pytest.mark.s3
@pytest.mark.parametrize(("size", "request_"), [(1_300_000, "copy_object"), (1000, "put_object")])
def test_s3_copy_whose_etag_is_not_the_checked_bytes_is_deleted(s3, monkeypatch, size, request_):
    shards, releases, prefix = s3
    data = os.urandom(size)
    storage.put(shards, prefix + "object", ContentFile(data))
    made = getattr(storage, request_)
    monkeypatch.setattr(storage, request_, lambda *args: made(*args) and "0" * 32)
    with pytest.raises(ObjectMismatch, match="the copy does not match its receipt"):
        storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data))
    assert storage.walk(releases, prefix) == []


@pytest.mark.s3
def test_s3_part_that_does_not_match_aborts_the_upload_and_leaves_no_object(s3, settings, monkeypatch):
    shards, releases, prefix = s3
    settings.CERES_S3_COPY_PART_BYTES = 5 * 1024 * 1024
    data = os.urandom(11 * 1024 * 1024)
    storage.put(shards, prefix + "object", ContentFile(data))
    read = storage._read_source

    def second_part_read_otherwise(*args, **kwargs):
        found_etag, parts, kept = read(*args, **kwargs)
        return found_etag, [parts[0], md5(b"other").digest(), *parts[2:]], kept

    monkeypatch.setattr(storage, "_read_source", second_part_read_otherwise)
    with pytest.raises(ObjectMismatch, match="part 2 of the copy does not match"):
        storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data))
    assert storage.walk(releases, prefix) == []
    uploads = releases.bucket.meta.client.list_multipart_uploads(Bucket=releases.bucket_name, Prefix=prefix)
    assert uploads.get("Uploads", []) == []


@pytest.mark.s3
def test_the_gateway_keeps_no_sha256_checksum_and_copies_an_object_in_parts_with_its_etag(s3):
    """What ``storage.copy`` is built around, held to the gateway (docs/releases.md, "How a released object is
    proven"): Swift 2.30's s3api neither checks nor keeps ``x-amz-checksum-sha256``, refuses
    ``x-amz-copy-source-if-match`` for an object stored in parts, and gives a whole copy of one the source's
    ETag. A gateway that changes any of these fails here, and the copy path may then be simplified."""
    import base64

    shards, releases, prefix = s3
    client = shards.bucket.meta.client
    data = os.urandom(1024)
    wrong = base64.b64encode(b"\0" * 32).decode()
    client.put_object(Bucket=shards.bucket_name, Key=prefix + "checksummed", Body=data, ChecksumSHA256=wrong)
    head = client.head_object(Bucket=shards.bucket_name, Key=prefix + "checksummed", ChecksumMode="ENABLED")
    assert "ChecksumSHA256" not in head and head["ETag"].strip('"') == md5(data).hexdigest()

    parted = os.urandom(10 * 1024 * 1024)
    storage.put(shards, prefix + "parted", ContentFile(parted))  # 8 MiB parts: two
    source_etag = etag(shards, prefix + "parted")
    copied_from = {"Bucket": shards.bucket_name, "Key": prefix + "parted"}
    with pytest.raises(ClientError) as refused:
        client.copy_object(Bucket=releases.bucket_name, Key=prefix + "copy", CopySource=copied_from,
                           CopySourceIfMatch=f'"{source_etag}"')
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    result = client.copy_object(Bucket=releases.bucket_name, Key=prefix + "copy", CopySource=copied_from)
    assert result["CopyObjectResult"]["ETag"].strip('"') == source_etag != md5(parted).hexdigest()


def seen_of(data: bytes, etag: str | None = None) -> dict:
    """What the verification job records of an object it read (``storage.checksums``)."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "md5": md5(data).hexdigest(), "size": len(data),
            "etag": md5(data).hexdigest() if etag is None else etag}


def test_a_recorded_md5_stands_for_the_bytes_only_when_it_was_taken_of_the_receipts_bytes_in_one_part():
    data, name = b"verified bytes" * 100, "s/object"

    def sealed(seen: dict) -> dict:
        return storage.seal(name, seen)

    assert storage.verified_copy(sealed(seen_of(data)), *digest_of(data), name=name) == md5(data).hexdigest()
    assert storage.verified_copy(sealed(seen_of(data, etag=f'"{md5(data).hexdigest().upper()}"')), *digest_of(data),
                                 name=name) == md5(data).hexdigest()
    # Episodes verified before MD5s were recorded, another receipt's bytes, a source stored in parts.
    assert storage.verified_copy(None, *digest_of(data), name=name) is None
    assert storage.verified_copy({}, *digest_of(data), name=name) is None
    assert storage.verified_copy(sealed(seen_of(data)), *digest_of(b"other bytes"), name=name) is None
    assert storage.verified_copy(sealed(seen_of(data)), hashlib.sha256(data).hexdigest(), len(data) + 1,
                                 name=name) is None
    assert storage.verified_copy(sealed(seen_of(data, etag=f"{md5(data).hexdigest()}-2")), *digest_of(data),
                                 name=name) is None
    assert storage.verified_copy(sealed(seen_of(data, etag="")), *digest_of(data), name=name) is None  # no ETag


def test_a_recorded_md5_without_its_seal_is_not_trusted():
    """Someone who can write the database but holds no secret key: an MD5 they wrote (of other bytes they stored
    under the name, say), a seal taken from another object, or none, makes the release read the object."""
    data, other, name = b"verified bytes" * 100, b"bytes stored later" * 100, "s/object"
    forged = {**seen_of(other), "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert storage.verified_copy(forged, *digest_of(data), name=name) is None
    assert storage.verified_copy({**forged, "seal": storage.seal(name, seen_of(data))["seal"]}, *digest_of(data),
                                 name=name) is None
    assert storage.verified_copy(storage.seal("s/another", seen_of(data)), *digest_of(data), name=name) is None
    assert storage.verified_copy(seen_of(data), *digest_of(data), name=name) is None  # no seal at all


def test_checksums_reads_an_object_once_and_keeps_its_bytes_when_asked(local):
    import io

    shards, _ = local
    data = os.urandom(3 * storage.CHUNK + 5)
    shards.save("s/object", ContentFile(data))
    held = io.BytesIO()
    assert storage.checksums(shards, "s/object", copy_to=held) == seen_of(data, etag="")
    assert held.getvalue() == data
    with pytest.raises(FileNotFoundError):
        storage.checksums(shards, "s/absent")


@pytest.mark.s3
def test_s3_copies_a_verified_object_without_reading_it_and_checks_the_copys_etag(s3, monkeypatch):
    """With the MD5 the verification job took of the checked bytes (its ETag then), the gateway copies the source
    if its ETag is still that MD5; neither the source nor the copy is read."""
    shards, releases, prefix = s3
    data = os.urandom(1_500_000)
    shards.bucket.meta.client.put_object(Bucket=shards.bucket_name, Key=prefix + "object", Body=data)
    seen = storage.checksums(shards, prefix + "object")
    assert seen == seen_of(data)
    verified = storage.verified_copy(storage.seal(prefix + "object", seen), *digest_of(data), name=prefix + "object")
    assert verified == md5(data).hexdigest()
    with monkeypatch.context() as patched:
        no_read_back(patched)
        patched.setattr(storage, "_read_source", lambda *args, **kwargs: pytest.fail("the source was read"))
        assert storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data),
                            verified_md5=verified) is False
        assert storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data),
                            verified_md5=verified) is True
    assert storage.digest(releases, prefix + "copy") == digest_of(data)


@pytest.mark.s3
def test_s3_object_changed_since_verification_is_refused_and_not_copied(s3, monkeypatch):
    shards, releases, prefix = s3
    data = os.urandom(1_500_000)
    storage.put(shards, prefix + "object", ContentFile(data))
    verified = storage.verified_copy(storage.seal(prefix + "object", storage.checksums(shards, prefix + "object")),
                                     *digest_of(data), name=prefix + "object")
    assert verified == md5(data).hexdigest()
    storage.put(shards, prefix + "object", ContentFile(os.urandom(1_500_000)))  # after verification
    with monkeypatch.context() as patched:
        patched.setattr(storage, "_read_source", lambda *args, **kwargs: pytest.fail("the source was read"))
        with pytest.raises(SourceMismatch, match=rf"{prefix}object: the stored object is not the one verified "
                                                 rf"against its receipt \(its ETag is no longer {verified}"):
            storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data),
                         verified_md5=verified)
    assert storage.walk(releases, prefix) == []
    shards.delete(prefix + "object")
    with pytest.raises(FileNotFoundError):
        storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data), verified_md5=verified)


@pytest.mark.s3
def test_s3_copy_by_a_recorded_md5_whose_etag_differs_is_deleted(s3, monkeypatch):
    shards, releases, prefix = s3
    data = os.urandom(1_300_000)
    storage.put(shards, prefix + "object", ContentFile(data))
    made = storage.copy_object
    monkeypatch.setattr(storage, "copy_object", lambda *args: made(*args) and "0" * 32)
    with pytest.raises(ObjectMismatch, match="the copy does not match its receipt"):
        storage.copy(shards, prefix + "object", releases, prefix + "copy", *digest_of(data),
                     verified_md5=md5(data).hexdigest())
    assert storage.walk(releases, prefix) == []


@pytest.mark.s3
def test_s3_small_or_multipart_verified_objects_take_the_read_path(s3, settings, monkeypatch):
    """At most ``CERES_S3_VERIFIED_COPY_MIN_BYTES`` a read and a PUT (quicker on this gateway); above the part
    size a copy in parts, whose parts' MD5s only a read gives."""
    shards, releases, prefix = s3
    settings.CERES_S3_COPY_PART_BYTES = 5 * 1024 * 1024
    read, reads = storage._read_source, []

    def counted(source, name, *args, **kwargs):
        reads.append(name)
        return read(source, name, *args, **kwargs)

    monkeypatch.setattr(storage, "_read_source", counted)
    for name, size in (("small", 20_000), ("large", 6 * 1024 * 1024)):
        data = os.urandom(size)
        shards.bucket.meta.client.put_object(Bucket=shards.bucket_name, Key=prefix + name, Body=data)
        assert storage.copy(shards, prefix + name, releases, prefix + name, *digest_of(data),
                            verified_md5=md5(data).hexdigest()) is False
        assert storage.digest(releases, prefix + name) == digest_of(data)
    assert reads == [prefix + "small", prefix + "large"]
