"""Request-wide pieces of accounts: who acts (for audit events raised by model signals) and the second factor."""

from __future__ import annotations

from contextvars import ContextVar
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse

from portal.accounts import services

_request: ContextVar[HttpRequest | None] = ContextVar("ceres_audit_request", default=None)


def current_actor():
    """The signed-in user of the request being served, or None outside a request (commands, tasks, shell)."""
    request = _request.get()
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated else None


class AuditActorMiddleware:
    """Makes the request's user known to audit receivers of model signals (user changes made in the admin)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


class SecondFactorMiddleware:
    """A signed-in user who must pass a second factor reaches nothing else until they have.

    Pages redirect to the second-factor page (enrolment first, if the user has no authenticator yet);
    API requests on such a session get 403. Token requests are not sessions: a token is made only
    from a session that passed.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self.open_paths = {reverse(name) for name in ("second-factor", "logout", "admin:logout")}

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        if request.path not in self.open_paths and services.awaiting_second_factor(user):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": "pass the second factor on the sign-in page first"}, status=403)
            return redirect(f"{reverse('second-factor')}?{urlencode({'next': request.get_full_path()})}")
        return self.get_response(request)
