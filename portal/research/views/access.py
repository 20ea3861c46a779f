"""Access pages: the researcher's home (grants, agreements, requests, datasets, recent links), asking for access
and accepting the data-use agreement (``services.access``); the study's access requests, granted, refused or
revoked by its coordinators and ethics officers."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, time, timedelta

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_scopes import scope, scopes_disabled

from portal.access.models import Role
from portal.access.permissions import active_roles, study_view
from portal.core import integers
from portal.core.errors import refusals
from portal.core.forms import date_input
from portal.core.pagination import list_page
from portal.research.models import AccessRequest, DatasetRequester, IssuedLink
from portal.research.services import access
from portal.research.views.links import LINK_ORDER
from portal.studies.models import Study
from portal.studies.services.study import current_data_use_agreement

COORDINATOR, ETHICS, RESEARCHER = Role.COORDINATOR, Role.ETHICS_OFFICER, Role.RESEARCHER
# Access requests are listed by the index (study, state, -created_at, -id).
REQUEST_ORDER = ("-created_at", "-pk")


def signed_in_study(view: Callable) -> Callable:
    """A study page any signed-in user may open (asking for access, reading the agreement): no role needed."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, study_code: str, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        study = get_object_or_404(Study, code=study_code)
        request.study = study
        request.study_roles = active_roles(request.user, study)
        with scope(study=study):
            return view(request, study, **kwargs)

    return wrapper


# --- the researcher's own page (all studies) -------------------------------------------------------------


@login_required
def research_home(request: HttpRequest) -> HttpResponse:
    """Grants, agreements accepted, access requests, studies open to requests, datasets and recent links."""
    user = request.user
    with scopes_disabled():
        requests_ = list(AccessRequest.objects.filter(researcher=user).select_related("study", "acceptance")
                         .order_by("-created_at", "-pk")[:50])
        grants = []
        for grant in user.role_grants.filter(role=RESEARCHER).select_related("study").order_by("study__code"):
            agreement = current_data_use_agreement(grant.study)
            accepted = access.latest_acceptance(user, grant.study)
            grants.append({"grant": grant, "agreement": agreement, "accepted": accepted,
                           "problem": access.access_problem(user, grant.study)})
        built = list(DatasetRequester.objects.filter(user=user).select_related("dataset__study")[:20])
        recent = list(IssuedLink.objects.filter(user=user).select_related("study", "release", "dataset")
                      .order_by(*LINK_ORDER)[:20])
    return render(request, "research/home.html", {
        "access_requests": requests_, "grants": grants, "open_studies": access.studies_open_to(user),
        "datasets": built, "recent_links": recent,
    })


# --- asking for access ---------------------------------------------------------------------------------------


class AgreementForm(forms.Form):
    version = integers.IntegerField(min_value=1, widget=forms.HiddenInput)
    sha256 = forms.CharField(widget=forms.HiddenInput, max_length=64)
    accept = forms.BooleanField(label="I have read the data-use agreement above and accept it", required=True)


class AccessRequestForm(AgreementForm):
    purpose = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), max_length=access.PURPOSE_MAX_CHARS,
                              help_text="What you will use the data for, in a few sentences.")
    field_order = ["purpose", "accept", "version", "sha256"]


def _agreement_initial(agreement) -> dict:
    return {"version": agreement.version, "sha256": agreement.sha256} if agreement else {}


@signed_in_study
def ask_access(request: HttpRequest, study) -> HttpResponse:
    """The study's current data-use agreement and a request for access with a purpose."""
    agreement = current_data_use_agreement(study)
    form = AccessRequestForm(request.POST or None, initial=_agreement_initial(agreement))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        with refusals(request, form=form) as outcome:
            access.request_access(request.user, study, purpose=data["purpose"], version=data["version"],
                                  sha256=data["sha256"])
        if not outcome.refused:
            messages.success(request, f"Your request for access to {study.title} is sent. A coordinator or ethics "
                                      f"officer of the study decides it.")
            return redirect("research-home")
    return render(request, "research/ask.html", {"study": study, "agreement": agreement, "form": form,
                                                 "closed": access.closed_to_requests(study) or None},
                  status=400 if form.errors else 200)


@signed_in_study
def accept_agreement(request: HttpRequest, study) -> HttpResponse:
    """Read and accept the current version of the agreement (needed again whenever a new version is published)."""
    agreement = current_data_use_agreement(study)
    form = AgreementForm(request.POST or None, initial=_agreement_initial(agreement))
    if request.method == "POST" and form.is_valid():
        with refusals(request, form=form) as outcome:
            access.accept_agreement(request.user, study, version=form.cleaned_data["version"],
                                    sha256=form.cleaned_data["sha256"])
        if not outcome.refused:
            messages.success(request, f"You accepted version {agreement.version} of the data-use agreement.")
            return redirect("research-home")
    accepted = access.latest_acceptance(request.user, study)
    return render(request, "research/agreement.html", {
        "study": study, "agreement": agreement, "form": form, "accepted": accepted,
        "current": accepted is not None and agreement is not None and accepted.agreement_id == agreement.pk,
    }, status=400 if form.errors else 200)


def _access_request(uid) -> AccessRequest:
    return get_object_or_404(AccessRequest.objects.select_related("researcher", "acceptance", "study"), uid=uid)


@require_POST
@signed_in_study
def cancel_access(request: HttpRequest, study, uid) -> HttpResponse:
    access_request = _access_request(uid)
    if access_request.study_id != study.pk:
        raise Http404("no such access request in this study")
    with refusals(request) as outcome:
        access.cancel_request(request.user, access_request)
    if not outcome.refused:
        messages.success(request, "Your access request is cancelled.")
    return redirect("research-home")


# --- the study's access requests, for its coordinators and ethics officers ---------------------------------


class GrantForm(forms.Form):
    until = forms.DateField(widget=date_input(), label="Access until (end of the day)")


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=access.REASON_MAX_CHARS)


@study_view(COORDINATOR, ETHICS)
def access_requests(request: HttpRequest, study) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in AccessRequest.State.values:
        state = ""
    rows = AccessRequest.objects.filter(study=study).select_related("researcher", "acceptance", "decided_by")
    if state:
        rows = rows.filter(state=state)
    page = list_page(request, rows, REQUEST_ORDER)
    default_until = timezone.localdate() + timedelta(days=min(180, settings.CERES_ACCESS_MAX_DAYS))
    return render(request, "research/access_requests.html", {
        "study": study, "page": page, "state": state, "states": AccessRequest.State.choices,
        "grant_form": GrantForm(initial={"until": default_until}), "reason_form": ReasonForm(),
        "now": timezone.now(),
    })


def _decide(request: HttpRequest, study, uid, act: Callable, success: str) -> HttpResponse:
    access_request = _access_request(uid)
    if access_request.study_id != study.pk:
        raise Http404("no such access request in this study")
    with refusals(request) as outcome:
        act(access_request)
    if not outcome.refused:
        messages.success(request, success.format(researcher=access_request.researcher.get_username()))
    return redirect(f"{reverse('research-access-requests', args=[study.code])}?state={access_request.state}")


def _end_of_day(day) -> datetime:
    return timezone.make_aware(datetime.combine(day, time(23, 59, 59)))


@require_POST
@study_view(COORDINATOR, ETHICS)
def grant_access(request: HttpRequest, study, uid) -> HttpResponse:
    if _access_request(uid).study_id != study.pk:  # another study's request: not found here, whatever was posted
        raise Http404("no such access request in this study")
    form = GrantForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Give the date the access ends.")
        return redirect("research-access-requests", study.code)
    until = _end_of_day(form.cleaned_data["until"])
    return _decide(request, study, uid, lambda r: access.grant_access(request.user, r, expires_at=until),
                   f"Access of {{researcher}} granted until {form.cleaned_data['until']}.")


@require_POST
@study_view(COORDINATOR, ETHICS)
def refuse_access(request: HttpRequest, study, uid) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _decide(request, study, uid, lambda r: access.refuse_access(request.user, r, reason=reason),
                   "Access of {researcher} refused.")


@require_POST
@study_view(COORDINATOR, ETHICS)
def revoke_access(request: HttpRequest, study, uid) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _decide(request, study, uid, lambda r: access.revoke_access(request.user, r, reason=reason),
                   "Access of {researcher} revoked: no further link is issued to them.")
