"""Leased jobs: one attempt at a time, and a killed attempt's job taken over once its lease has run out.

A long job (an export, a release, a one-dataset build, a withdrawal, a fixity run) keeps its lease on its row, a
``LeasedJob``: ``lease_until`` is the deadline by which the attempt at work must renew it. The model names the
setting of its lease's length (``LEASE_SETTING``, read at each use, one per kind of job: ``CERES_EXPORT_``,
``CERES_RELEASE_``, ``CERES_DATASET_``, ``CERES_WITHDRAWAL_`` and ``CERES_FIXITY_LEASE_SECONDS``) and what
``LeaseBusy`` calls the job (``LEASE_JOB``).

The life of a lease, each step here and nowhere else:

- **claim**: in a transaction, the row locked (``lock``), ``take`` raises ``LeaseBusy`` while another attempt's
  lease is live (``StudyTask`` retries once it has run out), else sets a new deadline and counts the attempt
  (when the row counts them, ``attempts``); the job's service saves these fields with its state;
- **heartbeat**: ``renew`` (or a ``Heartbeat``, which writes at most so often) sets a new deadline with the job's
  progress;
- **a transient error**: ``give_back`` ends the lease, noting ``retry_note`` where the job shows it, and the task
  retries;
- **the end**: the job's last state change (done, or failed for good) clears ``lease_until``.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import QuerySet
from django.utils import timezone

from portal.core.errors import LeaseBusy


class LeasedJob(models.Model):
    """A row that holds a job's lease. A model declares the setting of its lease's length and the job's name."""

    LEASE_SETTING: ClassVar[str]
    LEASE_JOB: ClassVar[str]

    lease_until = models.DateTimeField(
        null=True, blank=True,
        help_text="A running attempt's lease: renewed by its heartbeat; once past, another attempt takes over.")

    class Meta:
        abstract = True


def seconds(model: type[LeasedJob]) -> int:
    """How long a lease of ``model``'s job lasts without a heartbeat."""
    return getattr(settings, model.LEASE_SETTING)


def deadline(model: type[LeasedJob], now: datetime | None = None) -> datetime:
    """A new lease's deadline, from ``now``."""
    return (now or timezone.now()) + timedelta(seconds=seconds(model))


def lock(model: type[LeasedJob], *related: str, missing_ok: bool = False, **lookup) -> LeasedJob | None:
    """The job's row found by ``lookup``, locked until the transaction ends (``related`` rows read with it, not
    locked); None when there is none and ``missing_ok``."""
    rows = model.objects.select_for_update(of=("self",), no_key=True).filter(**lookup)
    if related:
        rows = rows.select_related(*related)
    return rows.first() if missing_ok else rows.get()


def seconds_left(job: LeasedJob, now: datetime | None = None) -> float:
    """How long the job's lease is still live; 0 when it has none or it has run out."""
    if job.lease_until is None:
        return 0.0
    return max(0.0, (job.lease_until - (now or timezone.now())).total_seconds())


def take(job: LeasedJob, now: datetime | None = None) -> dict[str, Any]:
    """Take the lease of a locked job: ``LeaseBusy`` while another attempt's lease is live; else a new deadline,
    and one more attempt when the row counts them. Set on ``job``, not saved: returns the fields it set, for the
    caller's save."""
    now = now or timezone.now()
    if left := seconds_left(job, now):
        raise LeaseBusy(job.LEASE_JOB, left)
    job.lease_until = deadline(type(job), now)
    if hasattr(job, "attempts"):
        job.attempts += 1
        return {"lease_until": job.lease_until, "attempts": job.attempts}
    return {"lease_until": job.lease_until}


def _rows(job: LeasedJob | QuerySet) -> QuerySet:
    return job if isinstance(job, QuerySet) else type(job).objects.filter(pk=job.pk)


def renew(job: LeasedJob | QuerySet, **progress) -> None:
    """The heartbeat: a new deadline, written with the job's ``progress`` fields (the row, or the rows given)."""
    rows = _rows(job)
    rows.update(lease_until=deadline(rows.model), **progress)


def give_back(job: LeasedJob | QuerySet, **fields) -> None:
    """End the lease, writing ``fields`` with it: before a retry (which then need not wait for it), or when the
    job fails for good without a state of its own."""
    _rows(job).update(lease_until=None, **fields)


def retry_note(exc: BaseException, countdown: float) -> str:
    """What a job shows of a transient error it retries after ``countdown`` seconds."""
    return f"storage error, retrying in {countdown:.0f} s: {exc}"


class Heartbeat:
    """``renew`` at most once every ``every`` seconds (and whenever forced): for a job that reports progress more
    often than the database needs to hear it."""

    def __init__(self, job: LeasedJob, every: float):
        self.job, self.every, self.last = job, every, time.monotonic()

    def __call__(self, *, force: bool = False, **progress) -> None:
        if not force and time.monotonic() - self.last < self.every:
            return
        self.last = time.monotonic()
        renew(self.job, **progress)
