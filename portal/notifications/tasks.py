"""Thin Celery tasks over the notification services: an email (retried with backoff, the last failure recorded
on the message). Beat's daily reminders of access that ends are research's (``research/tasks.py``)."""

from __future__ import annotations

from celery import shared_task

from portal.notifications import services

MAX_RETRIES = 8
BACKOFF_SECONDS, BACKOFF_MAX_SECONDS = 30, 3600


@shared_task(bind=True, name="notifications.deliver", acks_late=True, max_retries=MAX_RETRIES)
def deliver(self, notification_id: int) -> None:
    last = self.request.retries >= MAX_RETRIES
    try:
        services.deliver(notification_id, attempt=self.request.retries + 1, last_attempt=last)
    except Exception as exc:
        countdown = min(BACKOFF_MAX_SECONDS, BACKOFF_SECONDS * 2**self.request.retries)
        raise self.retry(exc=exc, countdown=countdown) from exc
