"""What the recording pipeline refuses."""

from __future__ import annotations

from portal.core.errors import ServiceError


class PipelineError(ServiceError):
    """A request the pipeline refuses (an action in the wrong state); the message says why."""


class IllegalTransition(PipelineError):
    """A recording cannot move from its state to the one asked for (``Recording.TRANSITIONS``)."""
