from __future__ import annotations

import io
from datetime import date

import pytest

from portal.studies.services.consent import accept_consent_document, upload_consent_document
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.headsets import register_headset


@pytest.fixture
def ethics(make_user, study):
    return make_user("ethics", study, ["ethics_officer"])


@pytest.fixture
def storage_dir(tmp_path, settings):
    """Local folders for the storages, private to the test."""
    settings.STORAGES = {
        **settings.STORAGES,
        "captures": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                     "OPTIONS": {"location": str(tmp_path / "captures")}},
    }
    return tmp_path


@pytest.fixture
def headset(study, coordinator):
    return register_headset(coordinator, study, headset_id="HS-0001", model="Quest 3")


@pytest.fixture
def demonstrator(study, coordinator, headset):
    return create_demonstrator(coordinator, study, headset=headset)


@pytest.fixture
def make_document(study, coordinator, storage_dir):
    def make(identifier="ICF-2026-03", version="1", *, issued_on=date(2026, 1, 1), text="I agree.",
             accepted_by=None):
        document = upload_consent_document(
            coordinator, study, identifier=identifier, version=version, issued_on=issued_on,
            uploaded_file=io.BytesIO(text.encode()),
        )
        if accepted_by is not None:
            accept_consent_document(accepted_by, document)
        return document

    return make


@pytest.fixture
def accepted_document(make_document, ethics):
    return make_document(accepted_by=ethics)
