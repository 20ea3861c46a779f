"""Raw-audio retention (services/audio.py): keep encrypted, strip, purge; checked on the stored objects
themselves, not on the database."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import date, timedelta
from pathlib import Path

import av
import pytest
from django.core.files.storage import storages
from django_scopes import scope

from portal.core import storage
from portal.recordings import crypto
from portal.recordings.models import AudioKey, PurgeReceipt, Recording
from portal.recordings.services.audio import purge_due_audio
from portal.recordings.services.export import export_recording
from portal.recordings.services.ingest import ingest_path, recheck
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.headsets import register_headset

pytestmark = pytest.mark.django_db


def audio_packets(source: Path) -> list[bytes]:
    """The raw audio payloads of every media file of a capture source (long enough to be unambiguous)."""
    payloads = []
    for media in sorted((source / "media").iterdir()):
        with av.open(str(media)) as container:
            if container.streams.audio:
                payloads += [bytes(p) for p in container.demux(container.streams.audio[0]) if p.size >= 48]
    return payloads


def stored_bytes(prefix: str) -> dict[str, bytes]:
    captures = storages["captures"]
    from portal.core.storage import walk

    return {name: captures.open(name, "rb").read() for name in walk(captures, prefix)}


def stored_audio_streams(objects: dict[str, bytes]) -> list[str]:
    found = []
    for name, data in objects.items():
        if name.endswith((".mp4", ".webm", ".m4a", ".wav")):
            with av.open(io.BytesIO(data)) as container:
                if container.streams.audio:
                    found.append(name)
    return found


def ingest(reg, source):
    with scope(study=reg.study):
        return ingest_path(reg.coordinator, reg.study, source)


@pytest.mark.parametrize("microphone", ["track", "file"])
def test_discard_leaves_no_audio_byte_in_storage(make_registry, make_capture, microphone):
    reg = make_registry(audio_policy="discard")
    source = make_capture(reg.claims(), microphone=microphone)
    packets = audio_packets(source)
    assert packets, "the generated source must carry audio"
    recording = ingest(reg, source)
    assert recording.state == Recording.State.QUEUED, recording.reason
    objects = stored_bytes(reg.study.code)
    assert objects and not any(name.endswith(".enc") for name in objects)
    assert stored_audio_streams(objects) == []
    for data in objects.values():
        assert not any(packet in data for packet in packets)
    manifest = json.loads(objects[recording.prefix + "source/capture.json"])
    assert manifest["audio"]["media"] is None
    with scope(study=reg.study):
        assert not AudioKey.objects.filter(recording=recording).exists()
        export_recording(recording.pk)
        recording.refresh_from_db()
    assert recording.state == Recording.State.EXPORTED, recording.reason
    assert stored_audio_streams({n: storages["shards"].open(n).read()
                                 for n in storage.walk(storages["shards"], reg.study.code)
                                 if n.endswith(".mp4")}) == []


def test_retain_days_keeps_audio_encrypted_then_purges_with_receipt(make_registry, make_capture):
    reg = make_registry(audio_policy="retain-days", audio_retain_days=2)
    source = make_capture(reg.claims(), microphone="file")
    original = (source / "media" / "microphone.m4a").read_bytes()
    recording = ingest(reg, source)
    assert recording.audio == Recording.Audio.ENCRYPTED
    objects = stored_bytes(reg.study.code)
    sealed_name = recording.prefix + "audio/media/microphone.m4a.enc"
    assert sealed_name in objects and original not in objects[sealed_name]
    assert stored_audio_streams(objects) == []
    with scope(study=reg.study):
        key = crypto.unwrap_key(AudioKey.objects.get(recording=recording).wrapped_key)
    plain = Path(source.parent / "decrypted.m4a")
    sealed = Path(source.parent / "sealed.enc")
    sealed.write_bytes(objects[sealed_name])
    crypto.decrypt_file(key, sealed, plain, associated=f"{recording.uid}/media/microphone.m4a".encode())
    assert plain.read_bytes() == original

    with scope(study=reg.study):
        assert purge_due_audio(now=recording.recorded_at + timedelta(days=1)) == 0
        assert purge_due_audio(now=recording.recorded_at + timedelta(days=2)) == 1
        receipt = PurgeReceipt.objects.get(recording=recording)
        assert not AudioKey.objects.filter(recording=recording).exists()
    assert receipt.rule == "retain-days 2" and receipt.key_destroyed
    assert receipt.objects_purged[0]["sha256"] == hashlib.sha256(objects[sealed_name]).hexdigest()
    assert receipt.objects_purged[0]["plain_sha256"] == hashlib.sha256(original).hexdigest()
    remaining = stored_bytes(reg.study.code)
    assert sealed_name not in remaining and not any(name.endswith(".enc") for name in remaining)


def test_until_export_purges_after_the_export(make_registry, make_capture):
    reg = make_registry(audio_policy="until-export")
    recording = ingest(reg, make_capture(reg.claims(), microphone="track"))
    assert recording.audio == Recording.Audio.ENCRYPTED
    with scope(study=reg.study):
        export_recording(recording.pk)
        recording.refresh_from_db()
        assert recording.audio == Recording.Audio.PURGED
        assert PurgeReceipt.objects.get(recording=recording).rule == "until-export"
    assert not any(name.endswith(".enc") for name in stored_bytes(reg.study.code))


@pytest.mark.parametrize("audio_consent", [True, False])
def test_a_quarantined_recordings_audio_is_kept_encrypted_until_the_recheck_decides(make_registry, make_capture,
                                                                                    audio_consent):
    """Quarantined (its headset is not registered yet), the recording keeps its audio sealed whatever the
    consent says; the re-check that accepts it keeps it or purges it by the consent."""
    scopes = ["episode_release", "raw_audio_retention"] if audio_consent else ["episode_release"]
    reg = make_registry(audio_policy="retain", scopes=scopes)
    recording = ingest(reg, make_capture(reg.claims(headset_id="HS-02"), microphone="track"))
    assert recording.state == Recording.State.QUARANTINED and recording.audio == Recording.Audio.ENCRYPTED
    assert [name for name in stored_bytes(recording.prefix) if name.endswith(".enc")] == [
        recording.prefix + "audio/media/camera.mp4.enc"]
    with scope(study=reg.study):
        register_headset(reg.coordinator, reg.study, headset_id="HS-02")
        recheck(reg.coordinator, recording)
        recording.refresh_from_db()
        receipts = list(PurgeReceipt.objects.filter(recording=recording).values_list("rule", flat=True))
    assert recording.state == Recording.State.QUEUED
    if audio_consent:
        assert recording.audio == Recording.Audio.ENCRYPTED and receipts == []
    else:
        assert recording.audio == Recording.Audio.PURGED
        assert receipts == ["consent does not cover raw-audio retention"]
        assert not any(name.endswith(".enc") for name in stored_bytes(recording.prefix))


def test_retain_without_audio_consent_strips_at_ingest(make_registry, make_capture):
    reg = make_registry(audio_policy="retain", scopes=["episode_release"])
    recording = ingest(reg, make_capture(reg.claims(), microphone="track"))
    assert recording.state == Recording.State.QUEUED and recording.audio == Recording.Audio.STRIPPED
    assert stored_audio_streams(stored_bytes(reg.study.code)) == []


def test_retain_keeps_audio_until_consent_is_withdrawn(make_registry, make_capture,
                                                       django_capture_on_commit_callbacks):
    reg = make_registry(audio_policy="retain")
    recording = ingest(reg, make_capture(reg.claims(), microphone="track"))
    assert recording.audio == Recording.Audio.ENCRYPTED
    with scope(study=reg.study):
        export_recording(recording.pk)
        assert purge_due_audio() == 0
        metadata = json.loads(storages["shards"].open(recording.episode.prefix + "ceres/episode-metadata.json").read())
        assert metadata["study"]["raw_audio_retained"] is True
        with django_capture_on_commit_callbacks(execute=True):
            withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(),
                                      reason="asked to leave the study")
        recording.refresh_from_db()
        assert recording.audio == Recording.Audio.PURGED
        assert PurgeReceipt.objects.get(recording=recording).rule == "consent withdrawn"
    assert not any(name.endswith(".enc") for name in stored_bytes(reg.study.code))


def test_an_undeclared_audio_track_is_found_and_stripped(make_registry, make_capture):
    reg = make_registry(audio_policy="discard")
    source = make_capture(reg.claims(), microphone="track")
    manifest = json.loads((source / "capture.json").read_text())
    del manifest["audio"]
    (source / "capture.json").write_text(json.dumps(manifest))
    recording = ingest(reg, source)
    assert recording.state == Recording.State.QUEUED and recording.audio == Recording.Audio.STRIPPED
    objects = stored_bytes(reg.study.code)
    assert stored_audio_streams(objects) == []
    assert "audio" not in json.loads(objects[recording.prefix + "source/capture.json"])
