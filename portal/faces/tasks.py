"""Thin Celery task over the detection service: a ``FaceDetection`` id in, loaded in its study's scope
(``StudyTask``), one service called. Runs on the heavy queue (settings' routes)."""

from __future__ import annotations

from celery import shared_task

from portal.core.tasks import StudyTask
from portal.faces.models import FaceDetection
from portal.faces.services import detection


@shared_task(bind=True, base=StudyTask, name="faces.detect_episode", model=FaceDetection,
             on_transient=staticmethod(detection.note_retry),
             give_up=staticmethod(lambda job, reason: detection.fail(job, reason)))
def detect_episode(self, job: FaceDetection) -> None:
    detection.run_detection(job.pk)
