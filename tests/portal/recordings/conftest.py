"""Fixtures for the recording pipeline: a registry that covers a recording, generated capture sources,
and a private storage per test (local folders), or the S3 gateway when ``CERES_STORAGE=s3``."""

from __future__ import annotations

import base64
import io
import itertools
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.generate import generate_capture
from portal.recordings import storage
from portal.studies import services as registry

RECORDED_AT = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
_seeds = itertools.count(1)


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
    from portal.recordings import tasks

    sent: list[tuple[str, tuple]] = []
    for name in ("ingest_recording", "export_recording", "verify_episode"):
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "delay", lambda *args, _name=task.name: sent.append((_name, args)))
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
        study = make_study(code, project_id="PRJ-1", **study_fields)
        coordinator = make_user(f"{code}-coord", study, ["coordinator"])
        ethics = make_user(f"{code}-ethics", study, ["ethics_officer"])
        with scope(study=study):
            headset = registry.register_headset(coordinator, study, headset_id="HS-01", model="test")
            demonstrator = registry.create_demonstrator(coordinator, study, headset=headset)
            document = registry.upload_consent_document(
                coordinator, study, identifier="ICF-2026-03", version="1",
                uploaded_file=io.BytesIO(b"I agree to be recorded."),
                issued_on=date.today() - timedelta(days=60))
            registry.accept_consent_document(ethics, document)
            registry.give_consent(coordinator, demonstrator, document=document,
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


@dataclass
class Worker:
    """A real ``celery worker`` process on its own Redis database and queue, against the test database."""

    env: dict
    queue: str
    log: Path
    process: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool", "solo", "-Q", self.queue,
                 "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL, no warning: the message it was working on stays unacknowledged in the broker."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def send(self, task, *args) -> None:
        from portal.celery import app

        with app.connection_for_write(self.env["CELERY_BROKER_URL"]) as connection:
            task.apply_async(args=args, connection=connection, queue=self.queue)


REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def worker(settings, tmp_path, unique_code):
    """Start with ``worker.start()``; killed at the end of the test whatever happens."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("needs PostgreSQL shared with a worker process: set DATABASE_URL=postgres://...")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis"):
        pytest.skip("needs a Redis broker: set CELERY_BROKER_URL=redis://...")
    from django.db import connection

    database = urlsplit(os.environ["DATABASE_URL"])._replace(path="/" + connection.settings_dict["NAME"])
    data_dir = tmp_path / "data"
    env = {
        **os.environ,
        "DATABASE_URL": urlunsplit(database),
        "CELERY_BROKER_URL": broker,
        "CERES_DATA_DIR": str(data_dir),
        "CERES_AUDIO_MASTER_KEY": base64.b64encode(settings.CERES_AUDIO_MASTER_KEY).decode(),
        "CERES_EXPORT_LEASE_SECONDS": "3",
        "CERES_TASK_VISIBILITY_TIMEOUT": "60",
    }
    if settings.STORAGE_BACKEND == "local":  # the worker must see this test's folders
        settings.STORAGES = {**settings.STORAGES, **{
            name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
                   "OPTIONS": {"location": str(data_dir / "storage" / name)}} for name in settings.STORAGE_NAMES}}
    process = Worker(env=env, queue=f"ceres-test-{unique_code}", log=tmp_path / "worker.log")
    try:
        yield process
    finally:
        process.kill()
