"""A real ``celery worker`` process for tests: its own queue on the shared Redis, the test's database.

Used by the recording tests here and by tests/e2e/test_recordings.py.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

REPO = Path(__file__).resolve().parents[3]


def worker_env(settings, data_dir: Path, queue: str, **extra: str) -> dict[str, str]:
    """The environment of a worker sharing this test's database, storage, keys and queue."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("needs PostgreSQL shared with a worker process: set DATABASE_URL=postgres://...")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis"):
        pytest.skip("needs a Redis broker: set CELERY_BROKER_URL=redis://...")
    from django.db import connection

    database = urlsplit(os.environ["DATABASE_URL"])._replace(path="/" + connection.settings_dict["NAME"])
    if settings.STORAGE_BACKEND == "local":  # the worker must see the same folders
        settings.STORAGES = {**settings.STORAGES, **{
            name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
                   "OPTIONS": {"location": str(data_dir / "storage" / name)}} for name in settings.STORAGE_NAMES}}
    return {
        **os.environ,
        "DATABASE_URL": urlunsplit(database),
        "CELERY_BROKER_URL": broker,
        "CERES_TASK_QUEUE": queue,
        "CERES_DATA_DIR": str(data_dir),
        "CERES_AUDIO_MASTER_KEY": base64.b64encode(settings.CERES_AUDIO_MASTER_KEY).decode(),
        "CERES_SIGNING_KEY": base64.b64encode(settings.CERES_SIGNING_KEY).decode(),
        "CERES_AUDIT_KEY": base64.b64encode(settings.CERES_AUDIT_KEY).decode(),
        # The test's own checkpoints: the worker writes one seconds after the events it commits.
        "CERES_AUDIT_CHECKPOINT_PREFIX": settings.CERES_AUDIT_CHECKPOINT_PREFIX,
        **extra,
    }


@dataclass
class Barrier:
    """Where a worker started with ``Worker.pause_before`` waits: ``paused`` appears when it stops, ``go``
    lets it (and every later attempt) through."""

    folder: Path

    def paused(self) -> str | None:
        """The name of the object the worker stopped before, or None while it has not reached it."""
        marker = self.folder / "paused"
        return marker.read_text() if marker.exists() else None

    def release(self) -> None:
        (self.folder / "go").write_text("")


@dataclass
class Worker:
    env: dict
    log: Path
    process: subprocess.Popen | None = field(default=None)

    @property
    def queue(self) -> str:
        return self.env["CERES_TASK_QUEUE"]

    def pause_before(self, suffix: str) -> Barrier:
        """From its next start, the worker stops before storing the shard object whose name ends with
        ``suffix`` until the barrier is released (``worker_main.py``)."""
        folder = self.log.parent / "barrier"
        folder.mkdir()
        self.env = {**self.env, "CERES_TEST_PAUSE_BEFORE": suffix, "CERES_TEST_BARRIER": str(folder)}
        return Barrier(folder)

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("worker_main.py")), "-A", "portal", "worker",
                 "--pool", "solo", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL, no warning: the message it was working on stays unacknowledged in the broker."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def send(self, task, *args) -> None:
        """Enqueue a task (or a task name) on the worker's broker and queue (this process's own Celery settings
        may differ)."""
        from portal.celery import app

        with app.connection_for_write(self.env["CELERY_BROKER_URL"]) as connection:
            app.send_task(getattr(task, "name", task), args=args, connection=connection, queue=self.queue)
