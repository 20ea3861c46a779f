"""Service errors and their one translation per surface.

A service refuses a request that breaks a rule by raising a ``ServiceError`` (each domain has its own
subclasses in its ``exceptions.py``). Pages translate it with ``refusals`` (a form error or a message),
the API with ``api_exception_handler`` (JSON with the HTTP status the error carries), admin actions with
``admin_refusals`` (an error message on the admin page) and management commands with ``command_refusals``
(a ``CommandError`` with the same text). Nothing else catches them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.management.base import CommandError


class ServiceError(Exception):
    """A request a service refuses because it breaks a rule. The message is written for the person who
    asked; ``status`` is the HTTP status the translations give it."""

    status = 400

    def details(self) -> dict[str, Any]:
        """Structured detail for API clients, beside the message."""
        return {}


class LeaseBusy(Exception):
    """Another attempt holds the lease of the job (``portal.core.leases``); not a refusal: ``StudyTask`` retries
    the task once the lease has run out, after ``seconds_left``."""

    def __init__(self, job: str, seconds_left: float):
        super().__init__(f"another {job} attempt holds the lease for {seconds_left:.0f} s more")
        self.seconds_left = seconds_left


@dataclass
class Refusal:
    error: ServiceError | None = None

    @property
    def refused(self) -> bool:
        return self.error is not None


@contextmanager
def refusals(request=None, *, form=None, field: str | None = None) -> Iterator[Refusal]:
    """Pages: run service calls; a ``ServiceError`` becomes an error on ``form``'s ``field`` (``None``: the
    form as a whole) when a form is given, else a message on the next page. The yielded ``Refusal`` says
    whether the service refused::

        with refusals(request) as outcome:
            services.recheck(request.user, recording)
        if not outcome.refused:
            messages.success(request, "...")
    """
    outcome = Refusal()
    try:
        yield outcome
    except ServiceError as error:
        outcome.error = error
        if form is not None:
            form.add_error(field, str(error))
        else:
            messages.error(request, str(error))


@contextmanager
def admin_refusals(model_admin, request, subject) -> Iterator[Refusal]:
    """Admin actions: a ``ServiceError`` becomes an error message on the admin page, naming ``subject`` (the row
    the action was applied to). The yielded ``Refusal`` says whether the service refused::

        for document in queryset:
            with admin_refusals(self, request, document) as outcome:
                services.accept(request.user, document)
            if not outcome.refused:
                self.message_user(request, f"{document} accepted.", messages.SUCCESS)
    """
    outcome = Refusal()
    try:
        yield outcome
    except ServiceError as error:
        outcome.error = error
        model_admin.message_user(request, f"{subject}: {error}", messages.ERROR)


@contextmanager
def command_refusals() -> Iterator[None]:
    """Management commands: a ``ServiceError`` becomes a ``CommandError`` with the same text (the command
    prints it and exits with an error status)."""
    try:
        yield
    except ServiceError as error:
        raise CommandError(str(error)) from None


def api_exception_handler(exc: Exception, context: dict):
    """The API: a ``ServiceError`` answers with its status and ``{"detail": message, ...details}``."""
    # Imported here: DRF's settings import the authentication classes, which raise ServiceErrors.
    from rest_framework.response import Response
    from rest_framework.views import exception_handler

    from portal.core.integers import IntegerOutOfRange

    if isinstance(exc, ServiceError):
        return Response({"detail": str(exc), **exc.details()}, status=exc.status)
    if isinstance(exc, IntegerOutOfRange):
        return Response({"detail": str(exc)}, status=400)
    return exception_handler(exc, context)
