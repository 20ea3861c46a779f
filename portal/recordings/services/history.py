"""The one place a recording changes state: ``core.states.transition`` with the recording's audit snapshot (the
move checked against ``Recording.TRANSITIONS``, saved, audited before and after), then written to its log."""

from __future__ import annotations

from typing import Any

from portal.core.states import lock_fresh, transition
from portal.recordings.exceptions import PipelineError
from portal.recordings.models import Recording, RecordingLog

_WARNING_STATES = (Recording.State.QUARANTINED, Recording.State.REJECTED, Recording.State.FAILED)


def note(recording: Recording, message: str, level: str = "info") -> None:
    """A line in the recording's log (shown on its page)."""
    RecordingLog.objects.create(study=recording.study, recording=recording, level=level, message=message)


def snapshot(recording: Recording) -> dict[str, Any]:
    return {"state": recording.state, "reason": recording.reason, "audio": recording.audio,
            "content_sha256": recording.content_sha256,
            "headset": str(recording.headset) if recording.headset_id else None,
            "demonstrator": str(recording.demonstrator) if recording.demonstrator_id else None}


def set_state(actor, recording: Recording, state: str, *, action: str, reason: str = "", note_text: str | None = None,
              if_allowed: bool = False, **fields) -> bool:
    """Move ``recording`` to ``state`` (``IllegalTransition`` if the table forbids it, or False with
    ``if_allowed``) with ``fields``, in the caller's transaction (``core.states.transition``); the reason (or
    ``note_text``) goes to the log, a warning for a refusal."""
    if not transition(actor, recording, state, action=action, snapshot=snapshot, if_allowed=if_allowed,
                      reason=reason, **fields):
        return False
    if note_text or reason:
        note(recording, note_text or reason, "warning" if state in _WARNING_STATES else "info")
    return True


def lock_in_state(recording: Recording, state: str, refusal: str) -> None:
    """Lock the recording's row and reload it, so the state check holds until the transaction ends (two
    clicks, or the page and the API at once, act once); ``PipelineError`` naming the state it is in, after
    ``refusal``, unless it is in ``state``."""
    lock_fresh(recording)
    if recording.state != state:
        raise PipelineError(f"{refusal}; this one is {recording.state}")
