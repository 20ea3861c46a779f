"""Fixtures for the recording pipeline: a registry that covers a recording, generated capture sources,
and a private storage per test (local folders), or the S3 gateway when ``CERES_STORAGE=s3``."""

from __future__ import annotations

import io
import itertools
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.generate import generate_capture
from portal.core import queue, storage
from portal.recordings.models import Recording
from portal.recordings.services.export import export_recording
from portal.recordings.services.ingest import ingest_path, ingest_received
from portal.studies.services.consent import accept_consent_document, give_consent, upload_consent_document
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.headsets import register_headset

sys.path.insert(0, str(Path(__file__).parent))
from pipeline_worker import Worker, worker_env

RECORDED_AT = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
# Generated captures get fresh seeds (so distinct content digests) above the few that tests pick by hand.
_seeds = itertools.count(1000)


@pytest.fixture(autouse=True)
def private_storage(settings, tmp_path):
    """Local storages in the test's own folder; on S3 the shared buckets (each test uses its own study code)."""
    if settings.STORAGE_BACKEND == "local":
        settings.STORAGES = {
            **settings.STORAGES,
            **{name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
                      "OPTIONS": {"location": str(tmp_path / "storage" / name)}}
               for name in settings.STORAGE_NAMES},
        }
    settings.CERES_INBOX_DIR = str(tmp_path / "inbox")


@pytest.fixture(autouse=True)
def sent_tasks(monkeypatch) -> list[tuple[str, tuple]]:
    """Tasks the code under test enqueued (name, args); nothing reaches a broker unless a test starts a worker."""
    sent: list[tuple[str, tuple]] = []
    monkeypatch.setattr(queue, "send", lambda name, *args: sent.append((name, args)))
    return sent


@dataclass
class Registry:
    study: object
    coordinator: object
    ethics: object
    headset: object
    demonstrator: object
    document: object

    def claims(self, **overrides) -> dict:
        claims = {"headset_id": self.headset.headset_id, "demonstrator_id": self.demonstrator.designator,
                  "project_id": self.study.project_id, "consent_date": None, "consent_document_id": None}
        return {**claims, **overrides}


@pytest.fixture
def unique_code():
    return f"rec{datetime.now(UTC):%H%M%S%f}"


@pytest.fixture
def make_registry(make_study, make_user, unique_code):
    """An active study with a headset, a demonstrator and an accepted consent covering recordings."""

    def make(*, scopes=("episode_release", "raw_audio_retention"), code: str | None = None, **study_fields):
        code = code or unique_code
        # Faces are not the point of the pipeline's tests: their studies say so (tests/portal/faces/ test them).
        study_fields.setdefault("face_policy", "off")
        study = make_study(code, project_id="PRJ-1", **study_fields)
        coordinator = make_user(f"{code}-coord", study, ["coordinator"])
        ethics = make_user(f"{code}-ethics", study, ["ethics_officer"])
        with scope(study=study):
            # Declared the study's a year back: the gate passes the recordings made since then.
            headset = register_headset(coordinator, study, headset_id="HS-01", model="test",
                                       assigned_on=date.today() - timedelta(days=365))
            demonstrator = create_demonstrator(coordinator, study, headset=headset)
            document = upload_consent_document(
                coordinator, study, identifier="ICF-2026-03", version="1",
                uploaded_file=io.BytesIO(b"I agree to be recorded."),
                issued_on=date.today() - timedelta(days=60))
            accept_consent_document(ethics, document)
            give_consent(coordinator, demonstrator, document=document,
                                  consent_date=date.today() - timedelta(days=30), scopes=list(scopes))
        return Registry(study, coordinator, ethics, headset, demonstrator, document)

    return make


@pytest.fixture
def reg(make_registry):
    return make_registry()


@pytest.fixture
def make_capture(tmp_path):
    """A tiny generated capture source claiming to come from ``claims``; returns its folder or ZIP path."""

    def make(claims: dict | None, *, seconds: float = 2.0, recorded_at: datetime = RECORDED_AT,
             seed: int | None = None, **kwargs) -> Path:
        seed = next(_seeds) if seed is None else seed
        options = {"rate_hz": 15, "width": 64, "height": 48, **kwargs}
        return generate_capture(tmp_path / "sources" / f"capture-{seed}", seconds=seconds, seed=seed, study=claims,
                                recorded_at=recorded_at, **options)

    return make


@pytest.fixture
def stored_objects():
    """``stored_objects(storage_name, prefix)``: every object under the prefix, listed through the storage itself."""

    def list_objects(storage_name: str, prefix: str) -> list[str]:
        return storage.walk(storages[storage_name], prefix)

    return list_objects



@pytest.fixture
def worker(settings, tmp_path, unique_code):
    """A real worker (``worker.start()``, ``worker.kill()``); killed at the end of the test whatever happens."""
    env = worker_env(settings, tmp_path / "data", f"ceres-test-{unique_code}",
                     CERES_EXPORT_LEASE_SECONDS="3", CERES_TASK_VISIBILITY_TIMEOUT="10")
    process = Worker(env=env, log=tmp_path / "worker.log")
    try:
        yield process
    finally:
        process.kill()


def accepted(reg, make_capture, **kwargs) -> Recording:
    """A recording ingested from a fresh capture of the registry, queued for export."""
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), **kwargs))
    assert recording.state == Recording.State.QUEUED, recording.reason
    return recording


def export(reg, recording) -> Recording:
    """The export task's work on ``recording``, run here."""
    with scope(study=reg.study):
        export_recording(recording.pk)
        recording.refresh_from_db()
    return recording


def zipped(folder):
    """The capture folder as a zip archive, as a headset uploads it."""
    return shutil.make_archive(str(folder), "zip", root_dir=folder.parent, base_dir=folder.name)


def run_ingest(reg):
    """What the worker would do for every upload waiting in storage."""
    with scope(study=reg.study):
        for recording in Recording.objects.filter(state=Recording.State.RECEIVED):
            ingest_received(recording)
