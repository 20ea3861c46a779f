"""Thin Celery tasks over the recording services: an id in, the object loaded in its study's scope
(``StudyTask``), one service called. Export and verification run on the heavy queue (settings' routes)."""

from __future__ import annotations

from celery import shared_task

from portal.core.tasks import StudyTask
from portal.recordings.models import Episode, Recording
from portal.recordings.services import audio, export, inbox, ingest, verification


@shared_task(bind=True, base=StudyTask, name="recordings.ingest_recording", model=Recording,
             give_up=staticmethod(lambda recording, reason: ingest.fail_ingest(recording, reason)))
def ingest_recording(self, recording: Recording) -> None:
    ingest.ingest_received(recording)


@shared_task(bind=True, base=StudyTask, name="recordings.export_recording", model=Recording,
             on_transient=staticmethod(export.note_retry),
             give_up=staticmethod(lambda recording, reason: export.fail_export(recording, reason)))
def export_recording(self, recording: Recording) -> None:
    export.export_recording(recording.pk)


@shared_task(bind=True, base=StudyTask, name="recordings.verify_episode", model=Episode)
def verify_episode(self, episode: Episode) -> None:
    verification.verify_episode(episode)


@shared_task(name="recordings.reverify_shards")
def reverify_shards() -> int:
    return verification.reverify_all()


@shared_task(name="recordings.purge_expired_audio")
def purge_expired_audio() -> int:
    return audio.purge_due_audio()


@shared_task(name="recordings.poll_inbox")
def poll_inbox() -> int:
    return len(inbox.poll_inbox())
