"""``storage.digest`` streams a stored object: on S3 it reads the GET response's body as it arrives instead of
django-storages' ``open``, which downloads the whole object into memory first; on local folders it reads the file.
Runs on the configured storage (the S3 gateway in CI) and on local folders."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from portal.core import storage


@pytest.fixture(params=["configured", "local"])
def shards(request, settings, tmp_path):
    if request.param == "local" or settings.STORAGE_BACKEND == "local":
        settings.STORAGES = {**settings.STORAGES, "shards": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "shards")}}}
    return storages["shards"]


def test_digest_streams_the_object_and_names_an_absent_one(shards, monkeypatch):
    name = f"stream-test-{datetime.now(UTC):%H%M%S%f}/object.bin"
    data = bytes(range(256)) * 9000  # a little over 2 MiB: more than one block
    shards.save(name, ContentFile(data))
    try:
        if hasattr(shards, "bucket"):  # S3: the spooling open is never used
            def spooling_open(*args, **kwargs):
                raise AssertionError("digest opened the object through django-storages' spooling S3File")

            monkeypatch.setattr(type(shards), "open", spooling_open)
        assert storage.digest(shards, name) == (hashlib.sha256(data).hexdigest(), len(data))
        with pytest.raises(FileNotFoundError):
            storage.digest(shards, name + ".absent")
        assert not storage.matches(shards, name + ".absent", hashlib.sha256(data).hexdigest(), len(data))
    finally:
        monkeypatch.undo()
        shards.delete(name)
