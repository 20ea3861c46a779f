"""Consent withdrawals: the demonstrator page's form that withdraws a demonstrator's consent (routed at the
registry's URL, ``study-withdraw-consent``, it calls ``services.withdrawals.withdraw_consent``, which records the
withdrawal, purges raw audio and opens the withdrawal job in one transaction), then what each withdrawal reached,
for the study's coordinators and ethics officers, and running a failed job again."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core.errors import refusals
from portal.core.pagination import list_page
from portal.notifications import events
from portal.research.models import Withdrawal
from portal.research.services import withdrawals
from portal.studies.forms import WithdrawalForm
from portal.studies.models import Demonstrator
from portal.studies.views import demonstrator_page

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER
WITHDRAWAL_ORDER = ("-created_at", "-pk")


@require_POST
@study_view(COORDINATOR)
def withdraw_consent(request: HttpRequest, study, demonstrator_pk: int) -> HttpResponse:
    """The demonstrator page's withdrawal form: on success, the withdrawal's page (what it reaches and what is done
    about it); refused, the demonstrator page again with the form's errors."""
    demonstrator = get_object_or_404(Demonstrator, pk=demonstrator_pk)
    form = WithdrawalForm(request.POST)
    if form.is_valid():
        with refusals(form=form, field="withdrawal_date") as outcome:
            event = withdrawals.withdraw_consent(request.user, demonstrator,
                                                 withdrawal_date=form.cleaned_data["withdrawal_date"],
                                                 reason=form.cleaned_data["reason"])
        if not outcome.refused:
            messages.success(request, f"Withdrawal recorded for {demonstrator.designator}: no more links are issued "
                                      f"for their episodes. Below, what it reaches and what is done about it.")
            return redirect("research-withdrawal", study.code, event.withdrawal_job.pk)
    return demonstrator_page(request, study, demonstrator, withdrawal_form=form)


@study_view(COORDINATOR, ETHICS)
def withdrawal_list(request: HttpRequest, study) -> HttpResponse:
    page = list_page(request, Withdrawal.objects.select_related("event"), WITHDRAWAL_ORDER)
    return render(request, "research/withdrawals.html", {"study": study, "page": page})


def _withdrawal(pk: int) -> Withdrawal:
    return get_object_or_404(Withdrawal.objects.select_related("event__demonstrator", "study"), pk=pk)


@never_cache
@study_view(COORDINATOR, ETHICS)
def withdrawal_detail(request: HttpRequest, study, pk: int) -> HttpResponse:
    withdrawal = _withdrawal(pk)
    return render(request, "research/withdrawal.html", {
        "study": study, "withdrawal": withdrawal, "reach": withdrawal.reach,
        "tombstones": withdrawal.tombstones.select_related("release", "dataset", "superseded_by"),
        "notices": events.withdrawal_told(withdrawal),
        "in_progress": withdrawal.state in (Withdrawal.State.QUEUED, Withdrawal.State.RUNNING),
    })


@study_view(COORDINATOR, ETHICS)
def withdrawal_status(request: HttpRequest, study, pk: int) -> JsonResponse:
    withdrawal = _withdrawal(pk)
    return JsonResponse({"state": withdrawal.state, "label": withdrawal.get_state_display(),
                         "phase": withdrawal.phase, "done": withdrawal.done, "total": withdrawal.total,
                         "last_error": withdrawal.last_error})


@require_POST
@study_view(COORDINATOR, ETHICS)
def withdrawal_run_again(request: HttpRequest, study, pk: int) -> HttpResponse:
    withdrawal = _withdrawal(pk)
    with refusals(request) as outcome:
        withdrawals.run_again(request.user, withdrawal)
    if not outcome.refused:
        messages.success(request, "The withdrawal job is queued again.")
    return redirect("research-withdrawal", study.code, pk)
