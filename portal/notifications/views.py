"""The inbox: a user's own messages, newest first; opening one marks it read and goes to its object. The
email switches live on the account page and post here."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.core.pagination import list_page
from portal.notifications import services
from portal.notifications.models import Kind

ORDER = ("-created_at", "-id")


@never_cache
@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    return render(request, "notifications/inbox.html", {
        "page": list_page(request, services.inbox(request.user), ORDER)})


@never_cache
@login_required
def open_notification(request: HttpRequest, pk: int) -> HttpResponse:
    notification = services.open_notification(request.user, pk)
    if notification is None:
        raise Http404("no such message in your inbox")
    link = notification.link
    if link and url_has_allowed_host_and_scheme(link, allowed_hosts={request.get_host()},
                                                require_https=request.is_secure()):
        return redirect(link)
    return redirect(f"{_inbox_url()}#n{notification.pk}")


def _inbox_url() -> str:
    from django.urls import reverse

    return reverse("notifications")


@require_POST
@login_required
def read_all(request: HttpRequest) -> HttpResponse:
    count = services.mark_all_read(request.user)
    messages.success(request, f"{count} message(s) marked read.")
    return redirect("notifications")


@require_POST
@login_required
def email_switches(request: HttpRequest) -> HttpResponse:
    chosen = request.POST.getlist("email")
    try:
        services.set_email_switches(request.user, chosen)
    except services.NotificationError as exc:
        messages.error(request, str(exc))
        return redirect("/accounts/#email-switches")
    on = len(set(chosen))
    messages.success(request, f"Email on for {on} of {len(Kind.values)} kinds of message; every message still "
                              f"reaches your inbox.")
    return redirect("/accounts/#email-switches")
