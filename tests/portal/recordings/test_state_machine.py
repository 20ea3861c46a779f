"""The recording's states and their moves live on ``Recording``: an illegal move raises and changes nothing,
and every move a recording makes on its way through the pipeline is one audit event with before and after."""

from __future__ import annotations

import pytest
from botocore.exceptions import EndpointConnectionError
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.recordings.exceptions import IllegalTransition
from portal.recordings.models import Episode, Recording
from portal.recordings.services.export import claim_export, export_recording, fail_export, note_retry, retry_export
from portal.recordings.services.history import set_state
from portal.recordings.services.ingest import ingest_path, recheck, register_demonstrator
from portal.recordings.services.verification import verify_episode
from portal.studies.services.consent import give_consent
from portal.studies.services.headsets import register_headset

pytestmark = pytest.mark.django_db

State = Recording.State


def test_every_state_has_its_moves_and_nothing_leaves_a_final_state():
    assert set(Recording.TRANSITIONS) == set(State.values)
    for final in (State.VERIFIED, State.REJECTED, State.DUPLICATE):
        assert Recording.TRANSITIONS[final] == frozenset()
    assert {State.RECEIVED, State.QUEUED, State.RUNNING, State.EXPORTED} == Recording.IN_FLIGHT


def test_an_illegal_move_raises_and_leaves_the_recording_as_it_was(reg, make_capture):
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(headset_id="HS-X")))
        events = AuditEvent.objects.count()
        with pytest.raises(IllegalTransition, match="cannot go from quarantined to exported"):
            set_state(None, recording, State.EXPORTED, action="recording.exported")
        assert claim_export(recording.pk) is None  # the export task leaves a quarantined recording alone
        with pytest.raises(IllegalTransition, match="cannot go from quarantined to running"):
            set_state(None, recording, State.RUNNING, action="recording.export_started")
    recording.refresh_from_db()
    assert recording.state == State.QUARANTINED and AuditEvent.objects.count() == events


def _moves(recording: Recording) -> list[tuple[str | None, str | None, str]]:
    events = AuditEvent.objects.filter(target_type="recordings.recording", target_id=str(recording.pk)).order_by("seq")
    return [((e.before or {}).get("state"), (e.after or {}).get("state"), e.action) for e in events
            if e.action != "recording.audio_stripped"]


def test_a_walk_through_every_move_leaves_one_audit_event_per_change(reg, make_capture):
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(headset_id="HS-LATE",
                                                                                    demonstrator_id="")))
        register_headset(reg.coordinator, reg.study, headset_id="HS-LATE")
        recheck(reg.coordinator, recording)                   # quarantined -> quarantined (no demonstrator yet)
        demonstrator = register_demonstrator(reg.coordinator, recording)  # quarantined -> quarantined
        give_consent(reg.coordinator, demonstrator, document=reg.document,
                     consent_date=reg.demonstrator.consent_events.get().event_date, scopes=["episode_release"])
        recheck(reg.coordinator, recording)                   # quarantined -> queued
        claim_export(recording.pk)                            # queued -> running
        note_retry(recording.pk, EndpointConnectionError(endpoint_url="http://s3.invalid"), 2)  # running -> queued
        fail_export(recording, "export failed: simulated")    # queued -> failed
        retry_export(reg.coordinator, recording)              # failed -> queued
        export_recording(recording.pk)                        # queued -> running -> exported
        verify_episode(Episode.objects.get(recording=recording))  # exported -> verified
    assert _moves(recording) == [
        (None, None, "recording.received"),
        ("received", "quarantined", "recording.quarantined"),
        ("quarantined", "quarantined", "recording.rechecked"),
        ("quarantined", "quarantined", "recording.demonstrator_registered"),
        ("quarantined", "queued", "recording.accepted"),
        ("queued", "running", "recording.export_started"),
        ("running", "queued", "recording.export_requeued"),
        ("queued", "failed", "recording.export_failed"),
        ("failed", "queued", "recording.export_retried"),
        ("queued", "running", "recording.export_started"),
        ("running", "exported", "recording.exported"),
        ("exported", "verified", "recording.verified"),
    ]


def test_a_failure_after_the_export_does_not_unmake_it(reg, make_capture):
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims()))
        export_recording(recording.pk)
        fail_export(recording, "internal error: RuntimeError('purge failed')")
        recording.refresh_from_db()
        assert recording.state == State.EXPORTED and recording.reason == ""
        assert "after export: internal error" in recording.log.last().message
