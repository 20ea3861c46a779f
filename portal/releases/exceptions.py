"""What the release services refuse, and the mismatch that fails a release."""

from __future__ import annotations

from portal.core.errors import ServiceError


class ReleaseError(ServiceError):
    """A release request the rules refuse (wrong state, wrong person, bad input); the message says why."""


class StorageUnavailable(ReleaseError):
    """The storage did not answer while a request was being made; nothing was made, try again."""

    status = 503


class IllegalTransition(ReleaseError):
    """A release request cannot move from its state to the one asked for (``ReleaseRequest.TRANSITIONS``)."""


class ApprovalRefused(ReleaseError):
    """An approval the four-eyes rule, the gate or the second factor refuses."""

    status = 403


class GateFailed(ApprovalRefused):
    """The automatic gate fails for some episodes; the message names each episode and why."""

    status = 409

    def __init__(self, message: str, failures: list[dict]):
        super().__init__(message)
        self.failures = failures

    def details(self) -> dict:
        return {"gate": self.failures}


class SecondFactorNeeded(ApprovalRefused):
    """Approving needs a second factor passed within the freshness window, or a code with the approval."""

    def details(self) -> dict:
        return {"second_factor": "required"}
