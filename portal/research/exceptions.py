"""What the researcher-access services refuse."""

from __future__ import annotations

from portal.core.errors import ServiceError


class ResearchError(ServiceError):
    """A request about researcher access, links or datasets that the rules refuse; the message says why."""


class AccessRefused(ResearchError):
    """The live check refused: no unexpired grant, no acceptance of the current data-use agreement, or the
    data is no longer released (withdrawn consent, a release that is not published)."""

    status = 403


class LinkRefused(ResearchError):
    """A portal download link that was altered, not issued here, or has expired. ``link_pk``: the issued link an
    expired (but genuine) token names, so the page can offer a fresh one for the same file."""

    status = 403

    def __init__(self, message: str, *, link_pk: int | None = None):
        super().__init__(message)
        self.link_pk = link_pk


class IllegalTransition(ResearchError):
    """An access request or a dataset cannot move from its state to the one asked for."""
