"""The email address and the password of one's own account: Django's own password views in the portal's layout,
with the portal's rules (throttled, audited, the login lockout applies) from ``portal.accounts.services``."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.accounts import services
from portal.accounts.forms import EmailForm
from portal.accounts.network import client_ip
from portal.core.errors import refusals


def _locked_out(request: HttpRequest) -> HttpResponse:
    return render(request, "registration/locked_out.html", {"cooloff_timedelta": settings.AXES_COOLOFF_TIME},
                  status=429)


class PasswordChange(auth_views.PasswordChangeView):
    """Change one's password, giving the current one. A wrong current password counts as a failed sign-in; once the
    account is locked out the session is signed out and the lockout page shown."""

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("account")
    extra_context = {"failure_limit": settings.AXES_FAILURE_LIMIT}

    def post(self, request, *args, **kwargs):
        if services.is_locked_out(request, request.user.get_username()):
            logout(request)
            return _locked_out(request)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        response = super().form_valid(form)
        services.password_changed(self.request.user, ip=client_ip(self.request), how="changed")
        messages.success(self.request, "Password changed. Your other sessions are signed out.")
        return response

    def form_invalid(self, form):
        if "old_password" in form.errors:
            user = self.request.user
            services.password_change_refused(user, self.request)
            if services.is_locked_out(self.request, user.get_username()):
                logout(self.request)
                return _locked_out(self.request)
        response = super().form_invalid(form)
        response.status_code = 400
        return response


class PasswordReset(auth_views.PasswordResetView):
    """Ask for a reset link by email. The same answer whether or not an account has the address; requests are
    limited per address and per client each hour."""

    template_name = "accounts/password_reset.html"
    email_template_name = "accounts/password_reset_email.txt"
    subject_template_name = "accounts/password_reset_subject.txt"
    success_url = reverse_lazy("password-reset-done")

    def form_valid(self, form):
        if not services.password_reset_allowed(form.cleaned_data["email"], client_ip(self.request)):
            form.add_error(None, "Too many reset requests for this address or from this computer: try again in an "
                                 "hour, or ask your study coordinator.")
            response = self.form_invalid(form)
            response.status_code = 429
            return response
        return super().form_valid(form)


class PasswordResetDone(auth_views.PasswordResetDoneView):
    template_name = "accounts/password_reset_done.html"


class PasswordResetConfirm(auth_views.PasswordResetConfirmView):
    """Set a new password from an emailed link. It does not sign in and does not lift a running lockout: the new
    password works once the lockout's cool-off is over or a coordinator has unlocked the account."""

    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("password-reset-complete")

    def form_valid(self, form):
        response = super().form_valid(form)
        services.password_changed(form.user, ip=client_ip(self.request), how="reset")
        return response


class PasswordResetComplete(auth_views.PasswordResetCompleteView):
    template_name = "accounts/password_reset_complete.html"


@require_POST
@login_required
def email_change(request: HttpRequest) -> HttpResponse:
    form = EmailForm(request.POST)
    if form.is_valid():
        with refusals(request) as outcome:
            services.request_email_change(
                request.user, form.cleaned_data["address"], ip=client_ip(request),
                confirm_url=lambda token: request.build_absolute_uri(reverse("email-confirm", args=[token])))
        if not outcome.refused:
            messages.success(request, f"A confirmation link was sent to {services.pending_email(request.user)}. "
                                      "Open it while signed in to start receiving the portal's mail there.")
    else:
        messages.error(request, "Enter an email address.")
    return redirect(reverse("account") + "#email")


@require_POST
@login_required
def email_remove(request: HttpRequest) -> HttpResponse:
    with refusals(request) as outcome:
        services.remove_email(request.user, ip=client_ip(request))
    if not outcome.refused:
        messages.success(request, "Email address removed: the portal sends you no mail; your inbox here still "
                                  "shows what concerns you.")
    return redirect(reverse("account") + "#email")


@never_cache
@login_required
def email_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The link sent to a new address: a page with a button (a link alone changes nothing), for the signed-in user
    the link was made for."""
    if request.method == "POST":
        with refusals(request) as outcome:
            address = services.confirm_email(request.user, token, ip=client_ip(request))
        if not outcome.refused:
            messages.success(request, f"{address} is confirmed: the portal's mail to you goes there.")
            return redirect(reverse("account") + "#email")
        return redirect(reverse("account") + "#email")
    return render(request, "accounts/email_confirm.html", {"pending": services.pending_email(request.user)})
