"""Ingest: validation, registry checks, quarantine and re-check, dedupe by content digest."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_scopes import scope

import exporter.video
from exporter.designator import family_pair
from exporter.errors import SourceError
from portal.audit.models import AuditEvent
from portal.recordings.exceptions import PipelineError
from portal.recordings.models import Recording
from portal.recordings.services.export import retry_export
from portal.recordings.services.ingest import (
    ingest_path,
    ingest_received,
    receive_upload,
    recheck,
    register_demonstrator,
)
from portal.studies.models import Demonstrator
from portal.studies.services.consent import give_consent
from portal.studies.services.headsets import register_headset, retire_headset
from portal.studies.services.study import set_study_status
from tests.portal.recordings.conftest import zipped

pytestmark = pytest.mark.django_db

State = Recording.State


def ingest(reg, path):
    with scope(study=reg.study):
        return ingest_path(reg.coordinator, reg.study, path)


def test_media_that_cannot_be_made_silent_is_rejected_and_nothing_is_kept(make_registry, make_capture, stored_objects,
                                                                        monkeypatch):
    """Ingest stores the encrypted audio, then the silent source; a camera file that cannot be remuxed
    without its audio rejects the recording and removes both (a fault injected into the remux)."""
    reg = make_registry(audio_policy="retain")

    def unreadable(src: Path, dst: Path) -> None:
        raise SourceError("cannot read the video stream (injected)", path=str(src))

    monkeypatch.setattr(exporter.video, "strip_audio", unreadable)
    recording = ingest(reg, make_capture(reg.claims(), microphone="track"))
    assert recording.state == State.REJECTED
    assert recording.reason.startswith("invalid media: ") and "cannot read the video stream (injected)" in \
        recording.reason
    assert stored_objects("captures", recording.prefix) == []


def test_valid_source_is_accepted_and_stored_under_its_prefix(reg, make_capture, stored_objects):
    recording = ingest(reg, make_capture(reg.claims()))
    assert recording.state == State.QUEUED, recording.reason
    assert recording.headset == reg.headset and recording.demonstrator == reg.demonstrator
    assert recording.summary["rows"] > 0 and recording.summary["tasks"]
    names = stored_objects("captures", reg.study.code)
    assert names and all(name.startswith(recording.prefix + "source/") for name in names)
    assert {f["name"] for f in recording.source_files} >= {"capture.json", "journal.ndjson", "media/camera.mp4"}


def test_same_source_twice_as_folder_and_zip_is_recognised(reg, make_capture, tmp_path, stored_objects):
    folder = make_capture(reg.claims(), seed=7)
    archive = shutil.make_archive(str(tmp_path / "again"), "zip", root_dir=folder.parent, base_dir=folder.name)
    first = ingest(reg, folder)
    second = ingest(reg, tmp_path / "again.zip")
    assert archive and second.state == State.DUPLICATE
    assert second.duplicate_of == first and second.content_sha256 == first.content_sha256
    assert str(first.uid) in second.reason
    assert all(name.startswith(first.prefix) for name in stored_objects("captures", reg.study.code))


@pytest.mark.parametrize(("claims", "expected"), [
    ({"headset_id": "HS-404"}, "headset 'HS-404' is not registered"),
    ({"demonstrator_id": "nobody-known-here-ever"}, "is not registered"),
    ({"project_id": "OTHER"}, "claims project 'OTHER'"),
])
def test_registry_mismatch_is_quarantined_with_reason(reg, make_capture, claims, expected):
    recording = ingest(reg, make_capture(reg.claims(**claims)))
    assert recording.state == State.QUARANTINED
    assert expected in recording.reason


def _demonstrators(reg) -> list[str]:
    with scope(study=reg.study):
        return sorted(Demonstrator.objects.values_list("designator", flat=True))


def test_a_quarantined_or_rejected_source_creates_nothing_in_the_registry(reg, make_capture, tmp_path):
    before = _demonstrators(reg)
    blank = ingest(reg, make_capture(reg.claims(demonstrator_id="")))
    assert blank.state == State.QUARANTINED and "names no demonstrator" in blank.reason
    unknown = ingest(reg, make_capture(reg.claims(demonstrator_id="able-acorn-fox-oak", headset_id="HS-NEW")))
    assert unknown.state == State.QUARANTINED
    assert "'able-acorn-fox-oak' is not registered" in unknown.reason and "HS-NEW" in unknown.reason
    broken = make_capture(reg.claims(demonstrator_id=""))
    (broken / "journal.ndjson").write_text('{"type": "frame"}\n{"type": "frame"}\n')
    assert ingest(reg, broken).state == State.REJECTED
    assert _demonstrators(reg) == before
    assert blank.demonstrator is None and unknown.demonstrator is None and unknown.headset is None


def test_a_coordinator_registers_the_demonstrator_of_a_blank_designator_then_consent_then_recheck(reg, make_capture):
    recording = ingest(reg, make_capture(reg.claims(demonstrator_id="")))
    with scope(study=reg.study):
        demonstrator = register_demonstrator(reg.coordinator, recording)
        assert recording.demonstrator == demonstrator and recording.state == State.QUARANTINED
        assert demonstrator.designator.startswith("-".join(family_pair(reg.headset.headset_id)) + "-")
        with pytest.raises(PipelineError, match="already has demonstrator"):
            register_demonstrator(reg.coordinator, recording)
        recheck(reg.coordinator, recording)
        assert recording.state == State.QUARANTINED and "no consent" in recording.reason
        give_consent(reg.coordinator, demonstrator, document=reg.document,
                              consent_date=date.today() - timedelta(days=30), scopes=["episode_release"])
        recheck(reg.coordinator, recording)
    assert recording.state == State.QUEUED and recording.demonstrator == demonstrator
    assert AuditEvent.objects.filter(action="recording.demonstrator_registered", target_id=str(recording.pk)).exists()


def test_registering_a_demonstrator_needs_the_claimed_headset_registered_first(reg, make_capture):
    recording = ingest(reg, make_capture(reg.claims(demonstrator_id="", headset_id="HS-LATE")))
    with scope(study=reg.study), pytest.raises(PipelineError, match="register headset 'HS-LATE'"):
        register_demonstrator(reg.coordinator, recording)


def test_recheck_after_the_registry_is_fixed(reg, make_capture):
    recording = ingest(reg, make_capture(reg.claims(headset_id="HS-02")))
    assert recording.state == State.QUARANTINED
    with scope(study=reg.study):
        with pytest.raises(PipelineError):
            retry_export(reg.coordinator, recording)
        recheck(reg.coordinator, recording)
        assert recording.state == State.QUARANTINED and "HS-02" in recording.reason
        register_headset(reg.coordinator, reg.study, headset_id="HS-02")
        recheck(reg.coordinator, recording)
    assert recording.state == State.QUEUED and recording.headset.headset_id == "HS-02"


def test_retired_headset_and_closed_study_are_quarantined(reg, make_capture):
    with scope(study=reg.study):
        retire_headset(reg.coordinator, reg.headset, reg.headset.registered_at.date())
    recording = ingest(reg, make_capture(reg.claims(), recorded_at=datetime.now(UTC)))
    assert recording.state == State.QUARANTINED and "retired" in recording.reason
    with scope(study=reg.study):
        set_study_status(reg.coordinator, reg.study, "closed")
    recording = ingest(reg, make_capture(reg.claims(), seed=99))
    assert "is closed" in recording.reason


def test_recording_before_consent_is_quarantined(reg, make_capture):
    with scope(study=reg.study):
        early = reg.demonstrator.consent_events.get().event_date - timedelta(days=2)
    recording = ingest(reg, make_capture(reg.claims(), recorded_at=datetime.combine(early, time(9), UTC)))
    assert recording.state == State.QUARANTINED and "no consent dated on or before" in recording.reason


def test_ingest_command(reg, make_capture, capsys):
    good = make_capture(reg.claims())
    call_command("ingest", str(good), "--study", reg.study.code)
    assert "queued" in capsys.readouterr().out
    bad = make_capture(reg.claims(headset_id="HS-77"))
    with pytest.raises(CommandError, match="1 of 1"):
        call_command("ingest", str(bad), "--study", reg.study.code)
    assert "HS-77" in capsys.readouterr().err
    with pytest.raises(CommandError, match="no study"):
        call_command("ingest", str(good), "--study", "nope")


def test_redelivered_ingest_only_removes_the_upload(reg, make_capture, stored_objects):
    with open(zipped(make_capture(reg.claims())), "rb") as stream, scope(study=reg.study):
        recording = receive_upload(reg.coordinator, reg.study, stream, name="capture.zip", via="api")
        incoming = recording.incoming_name
        ingest_received(recording)
        # A worker killed after the ingest but before the clean-up: the upload object is back, the task comes again.
        from django.core.files.base import ContentFile
        from django.core.files.storage import storages

        storages["captures"].save(incoming, ContentFile(b"left over"))
        Recording.objects.filter(pk=recording.pk).update(incoming_name=incoming)
        recording.refresh_from_db()
        ingest_received(recording)
    recording.refresh_from_db()
    assert recording.state == Recording.State.QUEUED and recording.incoming_name == ""
    assert incoming not in stored_objects("captures", reg.study.code)
