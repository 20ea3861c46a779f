"""The automatic release gate: one test per failing condition, each naming the episode and the reason; a failing
gate refuses submission and approval."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from exporter.generate import RAW_CAMERA_DEVICE_ID
from exporter.receipt import write_receipt
from portal.core import storage
from portal.recordings.models import Episode, Recording
from portal.recordings.services.verification import verify_episode
from portal.releases.exceptions import GateFailed
from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, release_requests
from portal.releases.services.approval import approve
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.models import Headset
from portal.studies.services.headsets import declare_assigned_on, retire_headset

pytestmark = pytest.mark.django_db


def update(model, pk: int, **fields) -> None:
    with scopes_disabled():
        model.objects.filter(pk=pk).update(**fields)


def checklist(request: ReleaseRequest) -> dict[str, dict[str, tuple[str, str]]]:
    with scope(study=request.study):
        return {episode.item.folder: {check.key: (check.status, check.detail) for check in episode.checks}
                for episode in gate.evaluate(request).episodes}


def failing(request: ReleaseRequest) -> dict[str, dict[str, str]]:
    return {folder: {key: detail for key, (status, detail) in checks.items() if status != gate.PASS}
            for folder, checks in checklist(request).items() if any(s != gate.PASS for s, _ in checks.values())}


def tamper(episode: Episode, path: str, change) -> None:
    """Change one file of a stored shard and rewrite its receipt (as a faulty exporter would have written it),
    so the shard still verifies: the gate must find the fault in the bytes."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / episode.folder
        shards = storage.shards()
        for name in storage.walk(shards, episode.prefix):
            storage.fetch(shards, name, root / name[len(episode.prefix):])
        change(root / path)
        receipt = write_receipt(root, episode_id=episode.recording.capture_id, episode_index=episode.episode_index,
                                created_at="2026-05-04T09:30:00Z")
        for local in sorted(p for p in root.rglob("*") if p.is_file()):
            storage.put(shards, episode.prefix + local.relative_to(root).as_posix(), local)
        episode.receipt_sha256 = hashlib.sha256(receipt).hexdigest()
        episode.shard_files = json.loads(receipt)["artefacts"]
        episode.save(update_fields=["receipt_sha256", "shard_files"])
    assert verify_episode(episode).ok


def test_a_clean_request_passes_every_check(team, verified, make_request):
    request = make_request(verified(1))
    checks = checklist(request)["episode-000000"]
    # The registry's study has face policy off: no faces line (tests/portal/faces/ test it under each policy).
    expected = dict.fromkeys((key for key in gate.LABELS if key != "faces"), gate.PASS)
    assert {key: status for key, (status, _) in checks.items()} == expected
    with scope(study=team.study):
        headset = team.reg.headset
        assert checks["headset"][1] == (f"HS-01: in the study since {headset.assigned_on} (registered on "
                                        f"{timezone.localdate(headset.registered_at)})")


def test_consent_not_covering_the_recording_date(team, verified, make_request):
    episode = verified(1)[0]
    request = make_request([episode])
    update(Recording, episode.recording_id, recorded_at=timezone.now() - timedelta(days=90))
    problems = failing(request)
    assert list(problems) == ["episode-000000"] and list(problems["episode-000000"]) == ["consent"]
    assert "no consent dated on or before" in problems["episode-000000"]["consent"]


def test_withdrawn_demonstrator(team, verified, make_request):
    episode = verified(1)[0]
    request = make_request([episode])
    with scope(study=team.study):
        withdraw_consent(team.reg.coordinator, team.reg.demonstrator, withdrawal_date=timezone.localdate(),
                         reason="no longer wishes to take part")
    problems = failing(request)["episode-000000"]
    assert f"{team.reg.demonstrator} withdrew consent on {timezone.localdate()}" in problems["withdrawal"]
    assert "consent withdrawn on" in problems["consent"]


def test_headset_retired_on_the_recording_date(team, verified, make_request):
    episode = verified(1)[0]
    request = make_request([episode])
    with scope(study=team.study):
        retire_headset(team.reg.coordinator, team.reg.headset, episode.recording.recorded_on)
    assert failing(request) == {"episode-000000": {
        "headset": f"HS-01 was retired on {episode.recording.recorded_on}, on or before the recording date "
                   f"{episode.recording.recorded_on}"}}


def test_headset_assigned_to_the_study_after_the_recording_date(make_registry, verified_factory):
    """The recording arrived from a headset registered (and so assigned) only after it was made: ingest accepts
    it, the gate does not; declaring that the headset was the study's from the recording date on lets it pass."""
    reg = make_registry()
    episode = verified_factory(reg)
    recorded_on = episode.recording.recorded_on
    registered_on = timezone.localdate(reg.headset.registered_at)
    update(Headset, reg.headset.pk, assigned_on=registered_on)  # as if registered without declaring a date
    with scope(study=reg.study):
        request = release_requests.create_request(reg.coordinator, reg.study, episodes=[episode], purpose="p")
        gate.inspect_request(request)
    assert failing(request) == {"episode-000000": {
        "headset": f"HS-01 was assigned to the study on {registered_on}, after the recording date {recorded_on}"}}
    with scope(study=reg.study), pytest.raises(GateFailed, match="headset registered to the study on the recording "
                                                                  "date: HS-01 was assigned to the study on"):
        release_requests.submit(reg.coordinator, request)

    with scope(study=reg.study):
        declare_assigned_on(reg.coordinator, Headset.objects.get(pk=reg.headset.pk), recorded_on)
    assert failing(request) == {}
    assert checklist(request)["episode-000000"]["headset"] == (
        gate.PASS, f"HS-01: in the study since {recorded_on} (registered on {registered_on})")


def test_audio_stream_in_the_stored_video(team, verified, make_request, make_capture):
    episode = verified(1)[0]
    with_audio = make_capture(team.reg.claims(), seconds=1.0, width=32, height=24, microphone="track")
    camera = next(with_audio.rglob("*.mp4"))
    video = next(name["path"] for name in episode.shard_files if name["path"].endswith(".mp4"))
    with scope(study=team.study):
        tamper(episode, video, lambda path: shutil.copyfile(camera, path))
    request = make_request([episode], submit=False)
    assert failing(request) == {"episode-000000": {"audio": "the stored video has an audio stream"}}


def test_raw_audio_kept_beyond_the_policy(make_registry, make_capture, make_user, verified_factory):
    reg = make_registry(audio_policy="retain-days", audio_retain_days=1)
    episode = verified_factory(reg, microphone="track")
    assert episode.recording.audio == Recording.Audio.ENCRYPTED
    with scope(study=reg.study):
        request = release_requests.create_request(reg.coordinator, reg.study, episodes=[episode], purpose="p")
        gate.inspect_request(request)
    assert failing(request) == {"episode-000000": {
        "audio": "raw audio is still kept although the rule 'retain-days 1' says it is purged"}}


def test_receipt_verified_too_long_ago_until_reverified_on_demand(team, verified, make_request, settings, sent_tasks,
                                                                   django_capture_on_commit_callbacks):
    settings.CERES_RELEASE_RECEIPT_MAX_AGE_HOURS = 24
    episode = verified(1)[0]
    request = make_request([episode])
    update(Episode, episode.pk, verified_at=timezone.now() - timedelta(hours=25))
    detail = failing(request)["episode-000000"]["receipt"]
    assert detail.startswith("last verified ") and detail.endswith("more than 24 h ago; re-verify it")
    with scope(study=team.study), django_capture_on_commit_callbacks(execute=True):
        release_requests.reverify(team.reg.ethics, request)
    assert sent_tasks == [("recordings.verify_episode", (episode.pk,))]
    with scope(study=team.study):
        verify_episode(Episode.objects.get(pk=episode.pk))  # what the queued task does
    assert failing(request) == {}


def test_receipt_mismatch_found_by_reverification(team, verified, make_request):
    episode = verified(1)[0]
    request = make_request([episode])
    info = episode.prefix + "meta/info.json"
    storage.put(storage.shards(), info, Path(tempfile.mkstemp()[1]))
    with scope(study=team.study):
        assert not verify_episode(Episode.objects.get(pk=episode.pk)).ok
    assert "the stored shard did not match its receipt at" in failing(request)["episode-000000"]["receipt"]


def test_leak_scan_finds_a_planted_device_id_in_the_stored_shard(team, verified, make_request):
    episode = verified(1)[0]

    def plant(path: Path) -> None:
        path.write_text(path.read_text().replace('"warnings": [', f'"warnings": ["camera {RAW_CAMERA_DEVICE_ID}", ', 1))

    with scope(study=team.study):
        tamper(episode, "ceres/episode-metadata.json", plant)
    request = make_request([episode], submit=False)
    assert failing(request) == {"episode-000000": {
        "leaks": "ceres/episode-metadata.json: holds the capture source's raw camera.device_id"}}


def test_a_failing_gate_refuses_submission_and_approval_naming_the_episode(team, verified, make_request):
    first, second = verified(2)
    draft = make_request([first, second], submit=False)
    update(Episode, second.pk, verified_at=timezone.now() - timedelta(days=30))
    with scope(study=team.study), pytest.raises(GateFailed) as refused:
        release_requests.submit(team.reg.coordinator, draft)
    assert str(refused.value).startswith(f"{draft.release_id} cannot be submitted: the release gate fails for "
                                         f"episode-000001: receipt verified recently: last verified")
    assert refused.value.details()["gate"][0]["episode"] == "episode-000001"

    update(Episode, second.pk, verified_at=timezone.now())
    with scope(study=team.study):
        release_requests.submit(team.reg.coordinator, draft)
    update(Episode, second.pk, verified_at=timezone.now() - timedelta(days=30))
    with scope(study=team.study), pytest.raises(GateFailed, match=r"cannot be approved: .* episode-000001: receipt"):
        approve(team.reg.ethics, draft, manifest_sha256=draft.manifest_sha256)
    with scope(study=team.study):
        assert not draft.approvals.exists()


def test_inspection_is_pending_until_the_task_reads_the_shard(team, verified, sent_tasks,
                                                             django_capture_on_commit_callbacks):
    episode = verified(1)[0]
    with scope(study=team.study), django_capture_on_commit_callbacks(execute=True):
        request = release_requests.create_request(team.reg.coordinator, team.study, episodes=[episode], purpose="p")
    assert ("releases.inspect_request", (request.pk,)) in sent_tasks
    pending = {key for key, (status, _) in checklist(request)["episode-000000"].items() if status == gate.PENDING}
    assert pending == {"audio", "leaks"}
    with scope(study=team.study), pytest.raises(GateFailed, match="has not been read yet"):
        release_requests.submit(team.reg.coordinator, request)
