"""A real Celery worker for drills, forked from the test process so it starts in a fraction of a second: it
inherits the test's settings (its database, storages, keys, short leases) and consumes one queue of its own on
RabbitMQ, which gives an unacknowledged message back the moment its consumer dies (Redis waits for the
visibility timeout). ``start(stop_at=k)`` makes the worker stop for good just before its k-th storage write or
delete and say so; the drill then SIGKILLs it there, at that point for certain, and starts the next one.
``start(count=True)`` only counts those operations (``operations()``), to learn how many a job has.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connections

RABBIT = os.environ.get("CERES_DRILL_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")


def wait_for(predicate, timeout: float, what: str):
    """``predicate()``'s first true value, asked every 0.1 s; fails naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def rabbit_up() -> bool:
    from kombu import Connection

    try:
        with Connection(RABBIT, connect_timeout=3) as connection:
            connection.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


@dataclass
class ForkedWorker:
    queue: str
    folder: Path
    broker: str = RABBIT
    pid: int | None = None
    started: int = field(default=0)

    def start(self, stop_at: int | None = None, *, resume_on: Path | None = None, count: bool = False) -> None:
        """Fork a worker; with ``stop_at``, it stops before its ``stop_at``-th storage write or delete, for good or,
        with ``resume_on``, until that file appears; with ``count``, it counts them."""
        self.stop()
        self.started += 1
        marker = self.marker
        marker.unlink(missing_ok=True)
        self.counter.unlink(missing_ok=True)
        if count:
            stop_at = 0  # never reached: counted only
        connections.close_all()  # the child opens its own
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                self._serve(stop_at, marker, resume_on)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        self.pid = pid

    @property
    def marker(self) -> Path:
        return self.folder / f"stopped-{self.queue}"

    @property
    def counter(self) -> Path:
        return self.folder / f"operations-{self.queue}"

    def operations(self) -> int:
        """How many storage writes and deletes the worker started with ``count=True`` has made so far."""
        return len(self.operation_kinds())

    def operation_kinds(self) -> list[str]:
        """The kind of each of them ("put", "copy", "delete"), in the order the worker began them."""
        return self.counter.read_text().split() if self.counter.exists() else []

    def poll_stopped(self, done=lambda: False) -> str | None:
        """What the worker was about to do once it reached its stop, None while it has not; fails if it ended
        first, or if the job was ``done`` before it (the stop was past the job's last storage operation)."""
        if self.marker.exists():
            return self.marker.read_text()
        if done():
            raise AssertionError("the job finished before the worker's stop: choose an earlier one")
        if self.pid is not None and os.waitpid(self.pid, os.WNOHANG)[0]:
            self.pid = None
            raise AssertionError("the worker ended before its stop")
        return None

    def _serve(self, stop_at: int | None, marker: Path, resume_on: Path | None) -> None:
        os.setpgid(0, 0)
        from django.core.files.storage import storages

        # The storages the test process opened hold its S3 connections (kept-alive sockets): sharing one with the
        # parent would mix two processes' requests on it. The worker opens its own.
        storages._storages.clear()
        from portal.celery import app
        from portal.core import queue

        # Celery reads CELERY_BROKER_URL from the environment over its configuration (infra/test.sh sets Redis).
        os.environ["CELERY_BROKER_URL"] = self.broker
        app.conf.broker_url = self.broker
        # The parent may have sent tasks before it forked (an audit checkpoint follows every commit of events): its
        # connection pool, to its own broker and on sockets it still uses, is not this process's. A plain fork runs
        # none of Celery's after-fork hooks, so its clean-up is called here.
        app._after_fork()
        app.conf.broker_transport_options = {"visibility_timeout": 3600}
        app.conf.broker_connection_retry_on_startup = True
        app.conf.worker_prefetch_multiplier = 1
        # Follow-up tasks (a verification after an export, a release after an approval) go to this queue too.
        queue.send = lambda name, *args: app.send_task(name, args=args, queue=self.queue)
        if stop_at is not None:
            _stop_before(stop_at, marker, resume_on, self.counter)
        log = self.folder / f"worker-{self.queue}.log"
        app.worker_main(["worker", "--pool", "solo", "--queues", self.queue, "--without-gossip", "--without-mingle",
                         "--without-heartbeat", "--loglevel", "INFO", "--logfile", str(log),
                         "--hostname", f"drill-{self.queue}-{self.started}@%h"])

    def wait_stopped(self, done=lambda: False, timeout: float = 120) -> str:
        """``poll_stopped`` until the worker reached its stop."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (where := self.poll_stopped(done)) is not None:
                return where
            time.sleep(0.02)
        raise AssertionError(f"the worker did not reach its stop within {timeout} s")

    def kill(self) -> None:
        """SIGKILL, no warning: the message it was working on goes back to the queue unacknowledged."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = None

    stop = kill

    def send(self, task_name: str, *args) -> None:
        from portal.celery import app

        with app.connection_for_write(self.broker) as connection:
            app.send_task(task_name, args=args, connection=connection, queue=self.queue)


def _stop_before(count: int, marker: Path, resume_on: Path | None, counter: Path) -> None:
    """Count the worker's storage writes and deletes (in ``counter``); before the ``count``-th (never, for 0), write
    the marker and wait: to die, or until ``resume_on`` appears. A release copies on threads: one lock counts."""
    import threading

    from django.core.files.storage import FileSystemStorage

    from portal.core import storage

    seen, kinds, lock = [0], [], threading.Lock()

    def counted(what: str, operation, at: int = 1):
        def wrapper(*args, **kwargs):
            with lock:
                seen[0] += 1
                reached = seen[0] == count
                kinds.append(what)
                counter.write_text(" ".join(kinds))
            if reached:
                staged = marker.with_name(marker.name + ".part")
                staged.write_text(f"{what} {args[at] if len(args) > at else args[0]}")
                staged.rename(marker)
                while resume_on is None or not resume_on.exists():
                    time.sleep(0.05)
            return operation(*args, **kwargs)

        return wrapper

    storage.put = counted("put", storage.put)
    # On S3 small checked bytes are stored by one PUT with their MD5 (put_checked, and copy for a small object).
    storage.put_object = counted("put", storage.put_object, at=2)
    storage.copy = counted("copy", storage.copy, at=3)  # a release's objects: a server-side copy or a hard link
    FileSystemStorage.delete = counted("delete", FileSystemStorage.delete)
    try:
        from storages.backends.s3 import S3Storage

        S3Storage.delete = counted("delete", S3Storage.delete)
    except ImportError:
        pass
