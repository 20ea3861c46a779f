"""Thin Celery tasks over the fixity services: beat's scheduled slice (heavy queue: it reads every byte of its
slice) and an alert's email (default queue)."""

from __future__ import annotations

import logging

from celery import shared_task

from portal.core.storage import is_transient
from portal.core.tasks import StudyTask
from portal.fixity.models import Alert
from portal.fixity.services import alerts, runs

log = logging.getLogger(__name__)


@shared_task(name="fixity.run_slice")
def run_slice() -> int | None:
    """The next slice of the store. A storage outage ends the run (recorded with the error); the next beat checks
    the same slice again, so nothing is retried here."""
    try:
        run = runs.run_scheduled()
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.error("fixity: the run stopped on a storage error, the next one checks its slice again: %s", exc)
        return None
    return run.pk if run is not None else None


@shared_task(bind=True, base=StudyTask, name="fixity.email_alert", model=Alert)
def email_alert(self, alert: Alert) -> int:
    return alerts.email_alert(alert)
