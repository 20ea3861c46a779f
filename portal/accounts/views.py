"""Account pages: API tokens, the second factor and its recovery codes, the email address (its views and the
password's are in ``views_password``), and a coordinator's view of locked-out study members."""

from __future__ import annotations

from urllib.parse import urlencode

import segno
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_otp import login as otp_login

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.accounts import services
from portal.accounts.forms import CodeForm, EmailForm, EnrolmentCodeForm, RecoveryCodeForm, TokenForm, UnlockForm
from portal.accounts.models import ApiToken
from portal.accounts.network import client_ip
from portal.core.errors import refusals
from portal.studies.models import Study


@never_cache
@login_required
def account(request: HttpRequest) -> HttpResponse:
    """The user's API tokens (make, list, revoke) and the state of their second factor."""
    form = TokenForm(request.user)
    new_key = None
    if request.method == "POST":
        form = TokenForm(request.user, request.POST)
        if form.is_valid():
            with refusals(form=form) as outcome:
                token, new_key = services.issue_token(request.user, name=form.cleaned_data["name"],
                                                      study=form.cleaned_data["study"], days=form.cleaned_data["days"],
                                                      second_factor=services.made_after_second_factor(request))
            if not outcome.refused:
                form = TokenForm(request.user)
                messages.success(request, f"Token “{token.name}” made. Copy its key now: it is not shown again.")
    return render(request, "accounts/account.html", {
        "form": form, "new_key": new_key, "tokens": services.tokens_of(request.user),
        "device": services.confirmed_device(request.user),
        "required_by_rule": services.second_factor_required_by_rule(request.user),
        "needs_second_factor": services.second_factor_required(request.user),
        "recovery_codes_left": services.recovery_codes_left(request.user),
        "email": services.confirmed_email(request.user), "pending_email": services.pending_email(request.user),
        "email_form": EmailForm(),
    }, status=400 if request.method == "POST" and new_key is None else 200)


@require_POST
@login_required
def revoke_token(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    services.revoke_token(request.user, token)
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) revoked.")
    return redirect("account")


@never_cache
@login_required
def second_factor(request: HttpRequest) -> HttpResponse:
    """Pass the second factor, or set one up (enrolment) when the account has none yet."""
    next_url = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        next_url = ""
    device = services.confirmed_device(request.user)
    if device is not None and request.user.is_verified():
        return redirect(next_url or "account")
    if device is None and services.awaiting_enrolment_code(request.user, request.session):
        return _enrolment_code(request, next_url)
    recovery_form = RecoveryCodeForm(request.POST if "recovery_code" in request.POST else None)
    if device is not None and recovery_form.is_bound:
        if recovery_form.is_valid():
            with refusals(form=recovery_form, field="recovery_code") as outcome:
                used = services.use_recovery_code(request.user, recovery_form.cleaned_data["recovery_code"],
                                                  ip=client_ip(request))
            if not outcome.refused:
                # Verified, but not noted as a fresh second factor: a release approval still asks the authenticator.
                otp_login(request, used)
                left = services.recovery_codes_left(request.user)
                messages.warning(request, f"Signed in with a recovery code; {left} left. If your authenticator is "
                                          "lost, ask a site administrator to reset it; make new codes on your "
                                          "account page.")
                return redirect(next_url or "dashboard")
        return render(request, "accounts/second_factor.html",
                      {"form": CodeForm(), "recovery_form": recovery_form, "next": next_url, "enrolling": False},
                      status=400)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        codes = None
        with refusals(form=form, field="code") as outcome:
            if device is None:
                device = services.confirm_enrolment(request.user, form.cleaned_data["code"], request.session,
                                                    ip=client_ip(request))
                codes = services.make_recovery_codes(request.user, ip=client_ip(request))
            else:
                device = services.check_second_factor(request.user, form.cleaned_data["code"], ip=client_ip(request))
        if not outcome.refused:
            otp_login(request, device)
            services.note_second_factor_passed(request.session)
            if codes is not None:
                messages.success(request, "Second factor set up: you will be asked for a code at every sign-in.")
                return _show_recovery_codes(request, codes, next_url or reverse("dashboard"))
            return redirect(next_url or "dashboard")
    context = {"form": form, "next": next_url, "enrolling": device is None, "recovery_form": RecoveryCodeForm()}
    if device is None:
        pending = services.start_enrolment(request.user, request.session)
        context["secret"] = services.totp_secret(pending)
        context["qr_svg"] = segno.make(pending.config_url, error="m").svg_inline(
            scale=4, title="QR code for the authenticator app")
    return render(request, "accounts/second_factor.html", context, status=400 if form.errors else 200)


def _show_recovery_codes(request: HttpRequest, codes: list[str], next_url: str) -> HttpResponse:
    """The recovery codes, this once: only their hashes are kept."""
    response = render(request, "accounts/recovery_codes.html", {"codes": codes, "next": next_url})
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@login_required
def recovery_codes(request: HttpRequest) -> HttpResponse:
    """Make a new set of recovery codes (the old ones stop working) and show them once."""
    codes = None
    with refusals(request) as outcome:
        codes = services.make_recovery_codes(request.user, ip=client_ip(request))
    if outcome.refused:
        return redirect("account")
    return _show_recovery_codes(request, codes, reverse("account"))


def _enrolment_code(request: HttpRequest, next_url: str) -> HttpResponse:
    """Ask for the site administrator's enrolment code before any secret is shown (CERES_REQUIRE_2FA)."""
    form = EnrolmentCodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with refusals(form=form, field="enrolment_code") as outcome:
            services.redeem_enrolment_code(request.user, form.cleaned_data["enrolment_code"], request.session,
                                           ip=client_ip(request))
        if not outcome.refused:
            target = reverse("second-factor") + (f"?{urlencode({'next': next_url})}" if next_url else "")
            return redirect(target)
    return render(request, "accounts/enrolment_code.html", {"form": form, "next": next_url},
                  status=400 if form.errors else 200)


@require_POST
@login_required
def remove_second_factor(request: HttpRequest) -> HttpResponse:
    with refusals(request) as outcome:
        services.remove_second_factor(request.user, request.user)
    if not outcome.refused:
        messages.success(request, "Second factor removed.")
    return redirect("account")


@study_view(Role.COORDINATOR)
def study_lockouts(request: HttpRequest, study: Study) -> HttpResponse:
    """Members of the study locked out after wrong passwords; the coordinator can unlock them."""
    form = UnlockForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with refusals(request) as outcome:
            services.unlock_in_study(request.user, study, form.cleaned_data["username"])
        if not outcome.refused:
            messages.success(request, f"{form.cleaned_data['username']} can sign in again.")
        return redirect("study-lockouts", study.code)
    members = set(study.role_grants.values_list("user__username", flat=True))
    return render(request, "accounts/lockouts.html", {
        "study": study, "lockouts": services.current_lockouts(usernames=members),
    })
