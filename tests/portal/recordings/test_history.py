"""The recording's states and their moves live on ``Recording``, and change in ``services/history.py``
(``set_state``): an illegal move raises and changes nothing, and every move of the table, walked through the
pipeline, is one audit event with before and after and one log line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.exceptions import EndpointConnectionError
from django.utils import timezone
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.recordings.exceptions import IllegalTransition
from portal.recordings.models import Episode, Recording, RecordingLog
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


TABLE_MOVES = {(source, target) for source, targets in Recording.TRANSITIONS.items() for target in targets}


class _Walk:
    """Steps of the pipeline, each checked for the audit events it leaves (before state, after state, action)
    and for one log line per move; ``walked`` collects the moves made."""

    def __init__(self):
        self.walked: set[tuple[str, str]] = set()

    def step(self, call, *expected: tuple[str | None, str | None, str]):
        seq = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        lines = RecordingLog.objects.count()
        result = call()
        events = AuditEvent.objects.filter(seq__gt=seq, target_type="recordings.recording").order_by("seq")
        made = [((e.before or {}).get("state"), (e.after or {}).get("state"), e.action) for e in events]
        assert made == list(expected), getattr(call, "__name__", call)
        moves = [(before, after) for before, after, _ in made if before is not None]
        assert RecordingLog.objects.count() - lines == len(moves), f"one log line per move: {made}"
        self.walked.update(moves)
        return result


def test_a_walk_through_every_move_leaves_one_audit_event_and_one_log_line_per_move(reg, make_capture):
    """The moves come from ``Recording.TRANSITIONS``: a move of the table that the walk does not make fails."""
    walk = _Walk()
    received = (None, None, "recording.received")
    with scope(study=reg.study):
        late = walk.step(lambda: ingest_path(reg.coordinator, reg.study, make_capture(
            reg.claims(headset_id="HS-LATE", demonstrator_id=""))),
            received, ("received", "quarantined", "recording.quarantined"))
        register_headset(reg.coordinator, reg.study, headset_id="HS-LATE")
        walk.step(lambda: recheck(reg.coordinator, late),  # no demonstrator yet
                  ("quarantined", "quarantined", "recording.rechecked"))
        demonstrator = walk.step(lambda: register_demonstrator(reg.coordinator, late),
                                 ("quarantined", "quarantined", "recording.demonstrator_registered"))
        give_consent(reg.coordinator, demonstrator, document=reg.document,
                     consent_date=reg.demonstrator.consent_events.get().event_date, scopes=["episode_release"])
        walk.step(lambda: recheck(reg.coordinator, late), ("quarantined", "queued", "recording.accepted"))
        walk.step(lambda: claim_export(late.pk), ("queued", "running", "recording.export_started"))
        walk.step(lambda: note_retry(late, EndpointConnectionError(endpoint_url="http://s3.invalid"), 2),
                  ("running", "queued", "recording.export_requeued"))
        walk.step(lambda: fail_export(late, "export failed: simulated"),
                  ("queued", "failed", "recording.export_failed"))
        walk.step(lambda: retry_export(reg.coordinator, late), ("failed", "queued", "recording.export_retried"))
        walk.step(lambda: export_recording(late.pk), ("queued", "running", "recording.export_started"),
                  ("running", "exported", "recording.exported"))
        walk.step(lambda: verify_episode(Episode.objects.get(recording=late)),
                  ("exported", "verified", "recording.verified"))

        source = make_capture(reg.claims())
        direct = walk.step(lambda: ingest_path(reg.coordinator, reg.study, source),
                           received, ("received", "queued", "recording.accepted"))
        walk.step(lambda: ingest_path(reg.coordinator, reg.study, source),  # the same source again
                  received, ("received", "duplicate", "recording.duplicate"))
        walk.step(lambda: claim_export(direct.pk), ("queued", "running", "recording.export_started"))
        # The worker holding the lease died: once its lease has run out, the next attempt takes over.
        Recording.objects.filter(pk=direct.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
        walk.step(lambda: claim_export(direct.pk), ("running", "running", "recording.export_started"))
        walk.step(lambda: fail_export(direct, "export failed: simulated"),
                  ("running", "failed", "recording.export_failed"))

        broken = make_capture(reg.claims())
        (broken / "journal.ndjson").write_text('{"type": "frame"}\n')
        walk.step(lambda: ingest_path(reg.coordinator, reg.study, broken),
                  received, ("received", "rejected", "recording.rejected"))
    assert not TABLE_MOVES - walk.walked, f"moves of the table never walked: {sorted(TABLE_MOVES - walk.walked)}"
    assert not walk.walked - TABLE_MOVES, f"moves outside the table: {sorted(walk.walked - TABLE_MOVES)}"


def test_a_failure_after_the_export_does_not_unmake_it(reg, make_capture):
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims()))
        export_recording(recording.pk)
        fail_export(recording, "internal error: RuntimeError('purge failed')")
        recording.refresh_from_db()
        assert recording.state == State.EXPORTED and recording.reason == ""
        assert "after export: internal error" in recording.log.last().message
