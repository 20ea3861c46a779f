"""The study's alerts (open, acknowledged, resolved; acknowledge and resolve with a note) and its fixity runs with
the problems they found, for its coordinators and ethics officers."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core.errors import refusals
from portal.core.pagination import list_page
from portal.fixity.models import Alert, FixityProblem, FixityRun, FixityRunStudy
from portal.fixity.services import alerts, runs

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER
# List orders, each served by an index: alerts (study[, state], created_at, id), a study's runs (study, run), the
# problems of a run in the study (study, run, id) and of an alert (alert, id).
ALERT_ORDER = ("-created_at", "-pk")
RUN_ORDER = ("-run_id",)
PROBLEM_ORDER = ("pk",)


class NoteForm(forms.Form):
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=alerts.NOTE_MAX_CHARS)


@study_view(COORDINATOR, ETHICS)
def alert_list(request: HttpRequest, study) -> HttpResponse:
    state = request.GET.get("state", "unresolved")
    rows = Alert.objects.only("pk", "kind", "state", "message", "created_at", "acknowledged_at", "resolved_at")
    if state == "unresolved":
        rows = rows.filter(state__in=Alert.UNRESOLVED)
    elif state in Alert.State.values:
        rows = rows.filter(state=state)
    else:
        state = ""
    return render(request, "fixity/alerts.html", {
        "study": study, "page": list_page(request, rows, ALERT_ORDER), "state": state,
        "states": [("unresolved", "Not resolved"), *Alert.State.choices, ("", "All")],
    })


def _alert(pk: int) -> Alert:
    return get_object_or_404(Alert.objects.select_related(
        "study", "run", "episode__recording", "acknowledged_by", "resolved_by"), pk=pk)


@study_view(COORDINATOR, ETHICS)
def alert_detail(request: HttpRequest, study, pk: int) -> HttpResponse:
    alert = _alert(pk)
    problems = FixityProblem.objects.filter(alert=alert).select_related("run").only(
        "kind", "storage", "object_name", "detail", "run__started_at", "run__id")
    return render(request, "fixity/alert.html", {
        "study": study, "alert": alert, "page": list_page(request, problems, PROBLEM_ORDER),
        "acknowledge_form": NoteForm(auto_id="acknowledge-%s"), "resolve_form": NoteForm(auto_id="resolve-%s"),
    })


def _act(request: HttpRequest, study, pk: int, act, done: str) -> HttpResponse:
    alert = _alert(pk)
    with refusals(request) as outcome:
        act(alert, request.POST.get("note", ""))
    if not outcome.refused:
        messages.success(request, done)
    return redirect("alert-detail", study.code, alert.pk)


@require_POST
@study_view(COORDINATOR, ETHICS)
def acknowledge_alert(request: HttpRequest, study, pk: int) -> HttpResponse:
    return _act(request, study, pk, lambda alert, note: alerts.acknowledge(request.user, alert, note=note),
                "Alert acknowledged: it no longer shows as a banner; resolve it once it is dealt with.")


@require_POST
@study_view(COORDINATOR, ETHICS)
def resolve_alert(request: HttpRequest, study, pk: int) -> HttpResponse:
    return _act(request, study, pk, lambda alert, note: alerts.resolve(request.user, alert, note=note),
                "Alert resolved.")


@study_view(COORDINATOR, ETHICS)
def run_list(request: HttpRequest, study) -> HttpResponse:
    rows = FixityRunStudy.objects.select_related("run").only(
        "objects_listed", "objects_checked", "bytes_checked", "problem_count", "run__kind", "run__slice_index",
        "run__slice_count", "run__studies", "run__started_at", "run__finished_at", "run__error")
    return render(request, "fixity/runs.html", {
        "study": study, "page": list_page(request, rows, RUN_ORDER), "slices": runs.slice_count(),
        "days": settings.CERES_FIXITY_DAYS, "runs_per_day": settings.CERES_FIXITY_RUNS_PER_DAY,
    })


@study_view(COORDINATOR, ETHICS)
def run_detail(request: HttpRequest, study, run_id: int) -> HttpResponse:
    share = get_object_or_404(FixityRunStudy.objects.select_related("run"), run_id=run_id)
    run: FixityRun = share.run
    problems = FixityProblem.objects.filter(run=run).select_related("alert").only(
        "kind", "storage", "object_name", "detail", "alert__id", "alert__state")
    return render(request, "fixity/run.html", {
        "study": study, "run": run, "share": share, "page": list_page(request, problems, PROBLEM_ORDER),
    })
