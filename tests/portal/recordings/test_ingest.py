"""Ingest: validation, registry checks, quarantine and re-check, dedupe by content digest."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, time, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_scopes import scope

from portal.recordings import services
from portal.recordings.models import Recording
from portal.studies import services as registry

pytestmark = pytest.mark.django_db

State = Recording.State


def ingest(reg, path):
    with scope(study=reg.study):
        return services.ingest_path(reg.coordinator, reg.study, path)


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


def test_blank_designator_gets_a_generated_demonstrator_then_needs_consent(reg, make_capture, stored_objects):
    recording = ingest(reg, make_capture(reg.claims(demonstrator_id="")))
    assert recording.state == State.QUARANTINED
    assert recording.demonstrator is not None and recording.demonstrator != reg.demonstrator
    assert recording.demonstrator.designator.count("-") == 3
    assert "no consent" in recording.reason


def test_recheck_after_the_registry_is_fixed(reg, make_capture):
    recording = ingest(reg, make_capture(reg.claims(headset_id="HS-02")))
    assert recording.state == State.QUARANTINED
    with scope(study=reg.study):
        with pytest.raises(services.PipelineError):
            services.retry_export(reg.coordinator, recording)
        services.recheck(reg.coordinator, recording)
        assert recording.state == State.QUARANTINED and "HS-02" in recording.reason
        registry.register_headset(reg.coordinator, reg.study, headset_id="HS-02")
        services.recheck(reg.coordinator, recording)
    assert recording.state == State.QUEUED and recording.headset.headset_id == "HS-02"


def test_retired_headset_and_closed_study_are_quarantined(reg, make_capture):
    with scope(study=reg.study):
        registry.retire_headset(reg.coordinator, reg.headset, reg.headset.registered_at.date())
    recording = ingest(reg, make_capture(reg.claims(), recorded_at=datetime.now(UTC)))
    assert recording.state == State.QUARANTINED and "retired" in recording.reason
    with scope(study=reg.study):
        registry.set_study_status(reg.coordinator, reg.study, "closed")
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
