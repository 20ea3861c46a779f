"""The base of every study task: load the object by id, enter its study's scope, apply the retry policy.

A task is declared with the model it works on; Celery passes the id, the task body receives the object::

    @shared_task(bind=True, base=StudyTask, name="recordings.verify_episode", model=Episode)
    def verify_episode(self, episode: Episode) -> None: ...

Every study task is acknowledged late (a worker killed mid-task leaves its message to be delivered again),
idempotent (the services check state first) and enqueued only after its transaction commits
(``portal.core.queue``). A ``LeaseBusy`` (another attempt holds the job's lease, ``portal.core.leases``) is retried
once the lease has run out. A transient storage error is retried with exponential backoff; any other error, or the
last retry, calls the task's ``give_up(obj, reason)`` (when it has one) and is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Task
from celery.exceptions import Retry
from django.db import models
from django_scopes import scope, scopes_disabled

from portal.core.errors import LeaseBusy
from portal.core.storage import is_transient

log = logging.getLogger(__name__)

MAX_RETRIES = 12
BACKOFF_SECONDS, BACKOFF_MAX_SECONDS = 2, 300


class StudyTask(Task):
    acks_late = True
    reject_on_worker_lost = True
    max_retries = MAX_RETRIES
    model: type[models.Model] | None = None
    # Called with (obj, exc, countdown) before a transient error is retried, and with (obj, reason) when the
    # task gives up; both optional, declared as ``give_up=staticmethod(service)``.
    on_transient: Callable[[Any, BaseException, float], None] | None = None
    give_up: Callable[[Any, str], None] | None = None

    def __call__(self, object_id: int, *args, **kwargs):
        with scopes_disabled():
            obj = self.model.objects.select_related("study").filter(pk=object_id).first()
        if obj is None:
            log.warning("%s: no %s with id %s (deleted since it was queued)", self.name,
                        self.model._meta.label, object_id)
            return None
        with scope(study=obj.study):
            try:
                return self._run(obj, *args, **kwargs)
            except Retry:
                raise
            except Exception as exc:
                self._retry_or_give_up(obj, exc)

    def _run(self, obj, *args, **kwargs):
        try:
            return self.run(obj, *args, **kwargs)
        except LeaseBusy as busy:  # another attempt is at work: try again once its lease has run out
            # Never given up for being busy: the limit of this retry is one more than those made so far (Celery
            # reads max_retries=None as "the task's limit", which would end a long wait as a failure). The
            # retries are counted with the storage retries, which the backoff's limit then sees.
            raise self.retry(countdown=busy.seconds_left + 1, max_retries=self.request.retries + 1) from busy

    def _retry_or_give_up(self, obj, exc: Exception):
        transient = is_transient(exc)
        if transient and self.request.retries < MAX_RETRIES:
            countdown = min(BACKOFF_MAX_SECONDS, BACKOFF_SECONDS * 2**self.request.retries)
            if self.on_transient is not None:
                self._note(self.on_transient, obj, exc, countdown)
            raise self.retry(exc=exc, countdown=countdown)
        if self.give_up is not None:
            self._note(self.give_up, obj, f"storage unavailable after retries: {exc}" if transient
                       else f"internal error: {exc!r}")
        raise exc

    def _note(self, hook: Callable, *args) -> None:
        """Run a hook that writes to the database; when the database is what is down, log it and go on (the
        retry, or the failure, must still be raised)."""
        from django.db import connections

        try:
            hook(*args)
        except Exception:
            log.exception("%s: could not record %s (the database may be down)", self.name, hook)
            for connection in connections.all():  # a broken connection is replaced on the next query
                connection.close_if_unusable_or_obsolete()
