"""The audit tests' releases storage: a folder of the test's own on local storage (the signed checkpoints go
there); on S3 the shared bucket, each test under its own checkpoint prefix (tests/conftest.py). The releases'
fixtures (a registry, verified episodes, a request) for the audit view's histories."""

from __future__ import annotations

import pytest

from tests.portal.releases import conftest as releases

make_capture, make_registry, reg, sent_tasks, unique_code = (releases.make_capture, releases.make_registry,
                                                             releases.reg, releases.sent_tasks, releases.unique_code)
verified_factory, verified, make_request = releases.verified_factory, releases.verified, releases.make_request


@pytest.fixture(autouse=True)
def releases_storage(settings, tmp_path):
    if settings.STORAGE_BACKEND == "local":
        settings.STORAGES = {**settings.STORAGES, "releases": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "storage" / "releases")}}}
