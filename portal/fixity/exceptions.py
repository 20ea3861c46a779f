"""What the alert services refuse, and a fixity run that cannot start."""

from __future__ import annotations

from portal.core.errors import ServiceError


class AlertError(ServiceError):
    """A request about an alert that the rules refuse (no note, wrong state); the message says why."""


class AlertRefused(AlertError):
    """Only a coordinator or an ethics officer of the alert's study acknowledges or resolves it."""

    status = 403


class IllegalTransition(AlertError):
    """An alert cannot move from its state to the one asked for (``Alert.TRANSITIONS``)."""

    status = 409


class FixityBusy(ServiceError):
    """Another fixity run holds the lease; a run is never checked twice at once."""

    status = 409
