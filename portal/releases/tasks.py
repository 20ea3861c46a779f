"""Thin Celery tasks over the release services: an id in, the request loaded in its study's scope
(``StudyTask``), one service called. Both run on the heavy queue (settings' routes)."""

from __future__ import annotations

from celery import shared_task

from portal.core.tasks import StudyTask
from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, publish


@shared_task(bind=True, base=StudyTask, name="releases.inspect_request", model=ReleaseRequest)
def inspect_request(self, release: ReleaseRequest) -> None:
    gate.inspect_request(release)


@shared_task(bind=True, base=StudyTask, name="releases.publish_release", model=ReleaseRequest,
             on_transient=staticmethod(publish.note_retry),
             give_up=staticmethod(lambda release, reason: publish.fail_release(release, reason)))
def publish_release(self, release: ReleaseRequest) -> None:
    publish.publish_release(release.pk)
