from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400 in the portal's layout. A number out of range (``IntegerOutOfRange``, whose message the portal wrote)
    is named; other reasons (Django's own, which may quote the request) are not shown."""
    from portal.core.integers import IntegerOutOfRange

    reason = str(exception) if isinstance(exception, IntegerOutOfRange) else ""
    return render(request, "400.html", {"reason": reason}, status=400)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """403 in the portal's layout when a form fails Django's CSRF check (CSRF_FAILURE_VIEW).

    Most often the form was stale: opened before a sign-in or sign-out in another tab, or sent without the
    cookie. Nothing was done; reloading the form and sending it again is the fix. The reason (token missing,
    incorrect, no cookie) is already logged by Django as a `django.security.csrf` warning.
    """
    return render(request, "403_csrf.html", status=403)


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages that name no icon (the admin, the API docs)."""
    return redirect(static("favicon.ico"))
