"""Enqueue a Celery task by name once the current transaction commits.

Services enqueue through here rather than importing their tasks, so tasks sit above the services they call
(no import cycle). The task's queue comes from ``CELERY_TASK_ROUTES`` (heavy work has a queue of its own).
"""

from __future__ import annotations

from django.db import transaction


def send(task_name: str, *args) -> None:
    """Send ``task_name(*args)`` now: for work that no transaction of the caller's has to commit first."""
    from portal.celery import app

    app.send_task(task_name, args=args)


def enqueue(task_name: str, *args) -> None:
    """Send ``task_name(*args)`` after the transaction commits (at once outside a transaction); a rolled-back
    change enqueues nothing."""
    transaction.on_commit(lambda: send(task_name, *args))


def send_later(task_name: str, *args, countdown: float, expires: float | None = None) -> None:
    """Send ``task_name(*args)`` now, to start ``countdown`` seconds from now (dropped unstarted after ``expires``
    seconds, when given)."""
    from portal.celery import app

    app.send_task(task_name, args=args, countdown=countdown, expires=expires)
