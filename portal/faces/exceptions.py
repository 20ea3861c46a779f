"""What the faces part refuses."""

from __future__ import annotations

from portal.core.errors import ServiceError


class FacesError(ServiceError):
    """A faces action refused: bad input, or the wrong state; the message says why."""


class FacesRefused(FacesError):
    """The caller may not do this (only the study's ethics officers review faces)."""

    status = 403
