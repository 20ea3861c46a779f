"""What the recording pipeline refuses, and the signal that another export attempt is at work."""

from __future__ import annotations

from portal.core.errors import ServiceError


class PipelineError(ServiceError):
    """A request the pipeline refuses (an action in the wrong state); the message says why."""


class IllegalTransition(PipelineError):
    """A recording cannot move from its state to the one asked for (``Recording.TRANSITIONS``)."""


class ExportBusy(Exception):
    """Another attempt holds the export lease; try again once it has run out. Not a refusal: the export task
    retries after ``seconds_left``."""

    def __init__(self, seconds_left: float):
        super().__init__(f"another export attempt holds the lease for {seconds_left:.0f} s more")
        self.seconds_left = seconds_left
