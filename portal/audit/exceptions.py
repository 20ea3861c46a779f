"""What the audit services refuse."""

from __future__ import annotations

from portal.core.errors import ServiceError


class CheckpointRefused(ServiceError):
    """No checkpoint was written: the chain's head does not extend the newest signed checkpoint (events missing,
    re-written or not verifying since), or that checkpoint cannot be trusted. A checkpoint never vouches for a
    chain that has been tampered with; the message says what is wrong."""

    status = 409
