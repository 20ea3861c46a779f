"""What the release services refuse, and the signal that another release attempt is at work."""

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


class ObjectMismatch(Exception):
    """A stored object does not match its receipt (the shard in storage, or the copy just made). Not transient:
    the release fails visibly and a person retries it once the cause is fixed."""


class ReleaseBusy(Exception):
    """Another attempt holds the release lease; not a refusal: the task retries after ``seconds_left``."""

    def __init__(self, seconds_left: float):
        super().__init__(f"another release attempt holds the lease for {seconds_left:.0f} s more")
        self.seconds_left = seconds_left
