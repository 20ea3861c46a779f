"""Thin Celery tasks: ids in, load, enter the study scope, call a service.

Every task is idempotent (the services check state first), acknowledged late (a worker killed mid-task
leaves its message to be delivered again) and enqueued only from ``transaction.on_commit``.
"""

from __future__ import annotations

from collections.abc import Callable

from celery import Task, shared_task
from django_scopes import scope, scopes_disabled

from portal.recordings import services, storage
from portal.recordings.models import Episode, Recording

MAX_RETRIES = 12
BACKOFF_SECONDS, BACKOFF_MAX_SECONDS = 2, 300


def _load(model, pk: int):
    with scopes_disabled():
        return model.objects.select_related("study").filter(pk=pk).first()


class PipelineTask(Task):
    acks_late = True
    reject_on_worker_lost = True
    max_retries = MAX_RETRIES

    def _retry_transient(self, exc: BaseException, recording_id: int | None = None,
                         give_up: Callable[[str], None] | None = None):
        """Retry a transient storage error with backoff (noted on the recording's log); otherwise, or when the
        retries run out, ``give_up`` records the reason on the recording, rather than leaving it "received" or
        "running", and the error is raised."""
        if storage.is_transient(exc) and self.request.retries < MAX_RETRIES:
            countdown = min(BACKOFF_MAX_SECONDS, BACKOFF_SECONDS * 2**self.request.retries)
            if recording_id is not None:
                services.note_retry(recording_id, exc, countdown)
            raise self.retry(exc=exc, countdown=countdown)
        if give_up is not None:
            give_up(f"storage unavailable after retries: {exc}" if storage.is_transient(exc)
                    else f"internal error: {exc!r}")
        raise exc


@shared_task(bind=True, base=PipelineTask, name="recordings.ingest_recording")
def ingest_recording(self, recording_id: int) -> None:
    recording = _load(Recording, recording_id)
    if recording is None:
        return
    with scope(study=recording.study):
        try:
            services.ingest_received(recording)
        except Exception as exc:
            self._retry_transient(exc, recording_id, lambda reason: services.fail_ingest(recording, reason))


@shared_task(bind=True, base=PipelineTask, name="recordings.export_recording")
def export_recording(self, recording_id: int) -> None:
    recording = _load(Recording, recording_id)
    if recording is None:
        return
    with scope(study=recording.study):
        try:
            services.export_recording(recording_id)
        except services.ExportBusy as busy:
            raise self.retry(countdown=busy.seconds_left + 1, max_retries=None) from busy
        except Exception as exc:
            self._retry_transient(exc, recording_id, lambda reason: services.fail_export(recording, reason))


@shared_task(bind=True, base=PipelineTask, name="recordings.verify_episode")
def verify_episode(self, episode_id: int) -> None:
    episode = _load(Episode, episode_id)
    if episode is None:
        return
    with scope(study=episode.study):
        try:
            services.verify_episode(episode)
        except Exception as exc:
            self._retry_transient(exc)


@shared_task(base=PipelineTask, name="recordings.reverify_shards")
def reverify_shards() -> int:
    return services.reverify_all()


@shared_task(base=PipelineTask, name="recordings.purge_expired_audio")
def purge_expired_audio() -> int:
    return services.purge_due_audio()


@shared_task(base=PipelineTask, name="recordings.poll_inbox")
def poll_inbox() -> int:
    return len(services.poll_inbox())
