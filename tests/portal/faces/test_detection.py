"""The detection job: queued when an episode is verified unless the policy is off, its lease, the stored file beside
the shard, a run again after a detector upgrade, and its progress on the recording page."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.core import storage
from portal.core.errors import LeaseBusy
from portal.faces.models import FaceDetection
from portal.faces.services import detection
from tests.portal.faces.conftest import DETECTOR, NEWER

pytestmark = pytest.mark.django_db


def _actions(study) -> list[str]:
    return list(AuditEvent.objects.filter(study_id=study.pk).order_by("pk").values_list("action", flat=True))


def test_off_queues_nothing_and_a_verified_episode_is_queued_under_redact(reg, verified, policy, sent_tasks,
                                                                           detector_id,
                                                                           django_capture_on_commit_callbacks):
    off = verified(1)[0]
    assert not [name for name, _ in sent_tasks if name == "faces.detect_episode"]
    with scope(study=reg.study):
        assert detection.queue_detection(None, off) is None
        assert not FaceDetection.objects.exists()
    policy("redact")
    with django_capture_on_commit_callbacks(execute=True):
        episode = verified(1)[0]
    with scope(study=reg.study):
        job = FaceDetection.objects.get(episode=episode)
    assert job.detector_id == DETECTOR and job.state == FaceDetection.State.QUEUED
    assert ("faces.detect_episode", (job.pk,)) in sent_tasks


def test_the_job_runs_the_detector_stores_the_file_beside_the_shard_and_one_worker_wins(reg, verified, policy):
    policy("detect")
    episode = verified(1, seconds=1.0, width=64, height=48)[0]
    with scope(study=reg.study):
        job = FaceDetection.objects.get(episode=episode)
        # A second worker while the first holds the lease waits for it.
        claimed = detection.claim(job.pk)
        assert claimed is not None and claimed.state == FaceDetection.State.RUNNING
        with pytest.raises(LeaseBusy):
            detection.claim(job.pk)
        FaceDetection.objects.filter(pk=job.pk).update(lease_until=None)  # the first worker died
        done = detection.run_detection(job.pk)
        assert done.state == FaceDetection.State.DONE, done.reason
        done.refresh_from_db()
        assert done.key == f"faces/{reg.study.code}/{episode.folder}/{detection.current_detector_id()}.parquet"
        assert not done.key.startswith(episode.prefix)  # the shard stays as exported
        assert storage.digest(storage.shards(), done.key) == (done.sha256, done.bytes)
        assert done.frame_count == episode.length and done.progress == 100 and done.lease_until is None
        assert done.box_count == 0  # the generated capture shows no face
        assert detection.run_detection(job.pk) is None  # done: the next delivery finds nothing to do
        assert "faces.detected" in _actions(reg.study)


def test_queue_study_runs_again_for_a_new_detector(reg, verified, policy, detector_id, store_detections,
                                                   sent_tasks):
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {})
    with scope(study=reg.study):
        assert detection.queue_study(None, reg.study) == 0  # the current detector's is done
        detector_id(NEWER)
        assert detection.queue_study(None, reg.study) == 1
        assert FaceDetection.objects.get(episode=episode, detector_id=NEWER).state == FaceDetection.State.QUEUED


def test_the_recording_page_shows_the_detection_and_its_progress(client, reg, verified, policy, detector_id):
    policy("redact")
    episode = verified(1)[0]
    with scope(study=reg.study):
        FaceDetection.objects.filter(episode=episode).update(state=FaceDetection.State.RUNNING, progress=40,
                                                             progress_note="frame 12 of 30")
    client.force_login(reg.coordinator)
    page = client.get(reverse("recording-detail", args=[reg.study.code, episode.recording.uid])).content.decode()
    assert f"Faces by <code>{DETECTOR}</code>: detecting" in page and 'value="40"' in page
    assert "frame 12 of 30" in page



def test_the_command_and_the_admin_action_queue_the_current_detector(client, reg, verified, policy, detector_id,
                                                                    store_detections, make_user):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {})
    out = StringIO()
    call_command("detect_faces", reg.study.code, stdout=out)
    assert out.getvalue().strip() == f"{reg.study.code}: 0 episode(s) queued for {DETECTOR}"
    detector_id(NEWER)
    call_command("detect_faces", reg.study.code, stdout=out)
    assert f"{reg.study.code}: 1 episode(s) queued for {NEWER}" in out.getvalue()
    with pytest.raises(CommandError, match="no study with the code 'nope'"):
        call_command("detect_faces", "nope", stdout=out)
    with scope(study=reg.study):
        old = FaceDetection.objects.get(episode=episode, detector_id=DETECTOR)
    admin = make_user("faces-admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    response = client.post(reverse("admin:faces_facedetection_changelist"),
                           {"action": "detect_again", "_selected_action": [old.pk]}, follow=True)
    assert f"1 episode(s) queued for {NEWER}." in response.content.decode()
    with scope(study=reg.study):
        assert FaceDetection.objects.get(episode=episode, detector_id=NEWER).state == FaceDetection.State.QUEUED


def test_a_video_that_does_not_match_its_receipt_fails_the_job_visibly(reg, verified, policy):
    policy("redact")
    episode = verified(1)[0]
    video = next(entry["path"] for entry in episode.shard_files if entry["path"].endswith(".mp4"))
    from io import BytesIO

    storage.put(storage.shards(), episode.prefix + video, BytesIO(b"not the exported video"))
    with scope(study=reg.study):
        job = FaceDetection.objects.get(episode=episode)
        failed = detection.run_detection(job.pk)
        job.refresh_from_db()
    assert failed.state == job.state == FaceDetection.State.FAILED and job.lease_until is None
    assert job.reason == f"detection failed: {episode.prefix}{video}: the stored object does not match its receipt"
    assert not storage.walk(storage.shards(), f"faces/{reg.study.code}/")
    assert "faces.detection_failed" in _actions(reg.study)
