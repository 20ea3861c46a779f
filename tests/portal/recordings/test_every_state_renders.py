"""Every page and every API list/detail that can show a recording renders for a recording in every state,
for every role that may see it: rejected before its claims were read, duplicate, quarantined, in flight,
exported, verified, mismatched, failed, with its raw audio purged.

One rejected upload once took the recordings list down for a whole study; this walks them all.
"""

from __future__ import annotations

import io
import os
import zipfile

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.urls import reverse
from django_scopes import scope

from portal.recordings.models import Episode, Recording
from portal.recordings.services.audio import purge_audio
from portal.recordings.services.export import claim_export, export_recording, fail_export
from portal.recordings.services.ingest import ingest_path, ingest_received, receive_upload
from portal.recordings.services.verification import verify_episode

pytestmark = pytest.mark.django_db

State = Recording.State
ACCEPTS = ("application/json", "text/html")


def _zip_of(folder) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    buffer.seek(0)
    return buffer


def _make_every_state(reg, make_capture, settings) -> dict[str, Recording]:
    study, coordinator = reg.study, reg.coordinator
    made: dict[str, Recording] = {}
    with scope(study=study):
        def upload(name: str, content) -> Recording:
            return receive_upload(coordinator, study, content, name=name, via="upload")

        made["received"] = upload("waiting.zip", _zip_of(make_capture(reg.claims())))
        made["rejected: random bytes"] = ingest_received(upload("random.zip", io.BytesIO(os.urandom(512))))
        made["rejected: empty"] = ingest_received(upload("empty.zip", io.BytesIO(b"")))
        limit, settings.CERES_MAX_SOURCE_BYTES = settings.CERES_MAX_SOURCE_BYTES, 1024
        made["rejected: too large to fetch"] = ingest_received(
            upload("large.zip", _zip_of(make_capture(reg.claims()))))
        settings.CERES_MAX_SOURCE_BYTES = limit
        hostile = io.BytesIO()
        with zipfile.ZipFile(hostile, "w") as archive:
            archive.writestr("../escape.txt", b"x")
        hostile.seek(0)
        made["rejected: hostile"] = ingest_received(upload("slip.zip", hostile))
        broken = make_capture(reg.claims())
        (broken / "capture.json").write_text('{"schema": "ceres-capture-source", "version": 7}')
        made["rejected: invalid manifest"] = ingest_path(coordinator, study, broken)

        source = make_capture(reg.claims())
        made["queued"] = ingest_path(coordinator, study, source)
        made["duplicate"] = ingest_path(coordinator, study, source)
        made["quarantined: unknown headset"] = ingest_path(
            coordinator, study, make_capture(reg.claims(headset_id="HS-UNKNOWN")))
        made["quarantined: blank designator"] = ingest_path(
            coordinator, study, make_capture(reg.claims(demonstrator_id="")))
        made["quarantined: no study block"] = ingest_path(coordinator, study, make_capture(None))

        running = ingest_path(coordinator, study, make_capture(reg.claims()))
        claim_export(running.pk)
        made["running"] = running

        exported = ingest_path(coordinator, study, make_capture(reg.claims()))
        export_recording(exported.pk)
        made["exported"] = exported

        verified = ingest_path(coordinator, study, make_capture(reg.claims(), microphone="track"))
        export_recording(verified.pk)
        verify_episode(Episode.objects.get(recording=verified))
        purge_audio(coordinator, verified, rule="purged by a test")
        made["verified, audio purged"] = verified

        mismatched = ingest_path(coordinator, study, make_capture(reg.claims()))
        export_recording(mismatched.pk)
        episode = Episode.objects.get(recording=mismatched)
        shards = storages["shards"]
        shards.delete(episode.prefix + "meta/info.json")
        shards.save(episode.prefix + "meta/info.json", ContentFile(b"{}"))
        verify_episode(episode)
        made["exported, receipt mismatch"] = mismatched

        failed = ingest_path(coordinator, study, make_capture(reg.claims()))
        fail_export(failed, "export failed: the camera file cannot be decoded")
        made["failed"] = failed

        for recording in made.values():
            recording.refresh_from_db()
    return made


def _expected_states(made: dict[str, Recording]) -> None:
    """The fixture really made what it says (a test of the test)."""
    for label, recording in made.items():
        assert recording.state == label.split(":")[0].split(",")[0].replace(" ", ""), (label, recording.reason)
    assert made["verified, audio purged"].audio == Recording.Audio.PURGED
    assert made["exported, receipt mismatch"].episode.receipt_status == Episode.Receipt.MISMATCH
    assert made["rejected: random bytes"].claims == {} and made["rejected: random bytes"].headset is None


def _pages(study, recording: Recording) -> list[str]:
    code = study.code
    pages = [
        reverse("dashboard"),
        reverse("study-overview", args=[code]),
        reverse("recording-list", args=[code]),
        reverse("recording-list", args=[code]) + f"?state={recording.state}",
        reverse("recording-detail", args=[code, recording.uid]),
        reverse("recording-status", args=[code, recording.uid]),
        reverse("episode-list", args=[code]),
        reverse("api-recording-list", args=[code]),
        reverse("api-recording-list", args=[code]) + f"?state={recording.state}",
        reverse("api-recording-detail", args=[code, recording.uid]),
        reverse("api-episode-list", args=[code]),
    ]
    if recording.headset_id:
        pages.append(reverse("recording-list", args=[code]) + f"?headset={recording.headset_id}")
    if recording.demonstrator_id:
        pages.append(reverse("recording-list", args=[code]) + f"?demonstrator={recording.demonstrator_id}")
        pages.append(reverse("study-demonstrator", args=[code, recording.demonstrator_id]))
    episode = Episode.objects.filter(recording=recording).first()
    if episode is not None:
        pages.append(reverse("api-episode-detail", args=[code, episode.episode_index]))
    return pages


def test_every_page_and_api_renders_a_recording_in_every_state_for_every_role(
        client, make_registry, make_capture, settings, make_user):
    settings.DEBUG = False
    reg = make_registry(audio_policy="retain")
    made = _make_every_state(reg, make_capture, settings)
    _expected_states(made)
    viewers = {"coordinator": reg.coordinator, "ethics officer": reg.ethics,
               "both roles": make_user(f"{reg.study.code}-both", reg.study, ["coordinator", "ethics_officer"])}
    client.raise_request_exception = False
    broken = []
    for role, user in viewers.items():
        client.force_login(user)
        for label, recording in made.items():
            with scope(study=reg.study):
                urls = _pages(reg.study, recording)
            for url in urls:
                for accept in ACCEPTS:
                    response = client.get(url, headers={"accept": accept})
                    if response.status_code != 200:
                        broken.append(f"{role} · {label} · {url} · {accept}: {response.status_code}")
    assert not broken, "\n".join(broken)
    shown = client.get(reverse("recording-list", args=[reg.study.code])).content.decode()
    assert all(f'data-uid="{recording.uid}"' in shown for recording in made.values())


def test_a_researcher_is_refused_every_recording_page_whatever_the_state(client, make_registry, make_capture,
                                                                        settings, make_user):
    reg = make_registry()
    made = _make_every_state(reg, make_capture, settings)
    researcher = make_user(f"{reg.study.code}-res", reg.study, ["researcher"])
    client.force_login(researcher)
    for recording in made.values():
        with scope(study=reg.study):
            urls = [url for url in _pages(reg.study, recording) if "recording" in url or "episode" in url]
        for url in urls:
            assert client.get(url).status_code == 403, url
