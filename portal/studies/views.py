"""Registry pages. Each view parses a form and calls a service; a refusal becomes a form error or a message."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Count
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core import display
from portal.core.errors import refusals
from portal.core.forms import RenderedOnce
from portal.core.pagination import list_page
from portal.core.suggest import suggestion_response
from portal.studies.exceptions import HeadsetImportError
from portal.studies.forms import (
    ApprovalSecondFactorForm,
    ApprovalsForm,
    AssignHeadsetForm,
    AudioPolicyForm,
    CarryOverApprovalsForm,
    ConfirmApprovalsForm,
    ConsentDocumentForm,
    ConsentForm,
    DataUseAgreementForm,
    DemonstratorForm,
    FacePolicyForm,
    HeadsetForm,
    HeadsetImportForm,
    RetireHeadsetForm,
    StudyStatusForm,
    WithdrawalForm,
)
from portal.studies.models import ConsentDocument, ConsentEvent, Demonstrator, Headset
from portal.studies.services import approval_policy, face_policy
from portal.studies.services import consent as consent_service
from portal.studies.services import demonstrators as demonstrator_service
from portal.studies.services import headsets as headset_service
from portal.studies.services import study as study_service

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER


def _attempt(form: forms.Form, field: str | None, service: Callable, *args, **kwargs):
    """Call a service; when it refuses, its message goes on the form's ``field`` and None is returned."""
    with refusals(form=form, field=field):
        return service(*args, **kwargs)
    return None


@study_view(COORDINATOR, ETHICS, Role.RESEARCHER)
def overview(request: HttpRequest, study) -> HttpResponse:
    registry = COORDINATOR in request.study_roles or ETHICS in request.study_roles
    context = {"study": study, "roles": request.study_roles, "registry": registry,
               "agreement": study_service.current_data_use_agreement(study)}
    if registry:
        context["counts"] = study_service.registry_counts(study)
    return render(request, "studies/overview.html", context)


# --- study settings ---------------------------------------------------------------------------


def _settings_page(request, study, **forms_by_name) -> HttpResponse:
    context = {
        "study": study,
        "status_form": StudyStatusForm(initial={"status": study.status}),
        "policy_form": AudioPolicyForm(initial={"audio_policy": study.audio_policy,
                                                "retain_days": study.audio_retain_days}),
        "roles": request.study_roles,
        "face_policy_form": FacePolicyForm(initial={"face_policy": study.face_policy}),
        "approvals_form": ApprovalsForm(initial={"approvals_required": study.approvals_required}),
        "confirm_approvals_form": ConfirmApprovalsForm(
            initial={"approvals_required": study.pending_approvals_required}),
        "second_factor_form": ApprovalSecondFactorForm(
            initial={"approval_second_factor": study.approval_second_factor}),
        "second_factor_by_rule": settings.CERES_REQUIRE_2FA,
        "carry_over_form": CarryOverApprovalsForm(initial={"carry_over_approvals": study.carry_over_approvals}),
        "agreement_form": _agreement_form(study),
        "agreement": study_service.current_data_use_agreement(study),
        **forms_by_name,
    }
    return render(request, "studies/settings.html", context, status=400 if forms_by_name else 200)


@study_view(COORDINATOR, ETHICS)
def study_settings(request: HttpRequest, study) -> HttpResponse:
    return _settings_page(request, study)


@require_POST
@study_view(COORDINATOR)
def set_status(request: HttpRequest, study) -> HttpResponse:
    form = StudyStatusForm(request.POST)
    if form.is_valid() and _attempt(form, "status", study_service.set_study_status, request.user, study,
                                    form.cleaned_data["status"]):
        messages.success(request, f"Study status is now {study.get_status_display().lower()}.")
        return redirect("study-settings", study.code)
    return _settings_page(request, study, status_form=form)


@require_POST
@study_view(COORDINATOR)
def set_audio_policy(request: HttpRequest, study) -> HttpResponse:
    form = AudioPolicyForm(request.POST)
    if form.is_valid() and _attempt(form, "audio_policy", study_service.set_audio_policy, request.user, study,
                                    form.cleaned_data["audio_policy"], retain_days=form.cleaned_data["retain_days"]):
        messages.success(request, f"Raw-audio policy is now {study.audio_policy_label}.")
        return redirect("study-settings", study.code)
    return _settings_page(request, study, policy_form=form)


@require_POST
@study_view(ETHICS)
def set_approvals(request: HttpRequest, study) -> HttpResponse:
    form = ApprovalsForm(request.POST)
    if form.is_valid() and _attempt(form, "approvals_required", approval_policy.set_approvals_required,
                                    request.user, study, form.cleaned_data["approvals_required"]):
        if study.pending_approvals_required is not None:
            messages.success(request, f"A release needing {study.pending_approvals_required} approval(s) awaits "
                                      f"another ethics officer's confirmation; it still needs "
                                      f"{study.approvals_required}.")
        else:
            messages.success(request, f"A release now needs {study.approvals_required} approval(s).")
        return redirect("study-settings", study.code)
    return _settings_page(request, study, approvals_form=form)


@require_POST
@study_view(ETHICS)
def set_face_policy(request: HttpRequest, study) -> HttpResponse:
    form = FacePolicyForm(request.POST)
    if form.is_valid() and _attempt(form, "face_policy", face_policy.set_face_policy, request.user, study,
                                    form.cleaned_data["face_policy"]):
        messages.success(request, f"Face policy is now {study.face_policy}; release requests made from now on "
                                  f"follow it.")
        return redirect("study-settings", study.code)
    return _settings_page(request, study, face_policy_form=form)


@require_POST
@study_view(ETHICS)
def confirm_approvals(request: HttpRequest, study) -> HttpResponse:
    form = ConfirmApprovalsForm(request.POST)
    if form.is_valid() and _attempt(form, None, approval_policy.confirm_approvals_required, request.user, study,
                                    form.cleaned_data["approvals_required"]):
        messages.success(request, f"Confirmed: a release now needs {study.approvals_required} approval(s).")
        return redirect("study-settings", study.code)
    return _settings_page(request, study, confirm_approvals_form=form)


@require_POST
@study_view(COORDINATOR)
def set_approval_second_factor(request: HttpRequest, study) -> HttpResponse:
    form = ApprovalSecondFactorForm(request.POST)
    if form.is_valid() and _attempt(form, None, study_service.set_approval_second_factor, request.user, study,
                                    form.cleaned_data["approval_second_factor"]):
        messages.success(request, "Approving a release now " + ("needs" if study.approval_second_factor
                                                                 else "does not need") + " a fresh second factor.")
        return redirect("study-settings", study.code)
    return _settings_page(request, study, second_factor_form=form)


@require_POST
@study_view(COORDINATOR)
def set_carry_over_approvals(request: HttpRequest, study) -> HttpResponse:
    form = CarryOverApprovalsForm(request.POST)
    if form.is_valid() and _attempt(form, None, study_service.set_carry_over_approvals, request.user, study,
                                    form.cleaned_data["carry_over_approvals"]):
        messages.success(request, "A release superseded after a withdrawal now " + (
            "keeps its approvals." if study.carry_over_approvals else "goes back to the ethics officers' review."))
        return redirect("study-settings", study.code)
    return _settings_page(request, study, carry_over_form=form)


def _agreement_form(study) -> DataUseAgreementForm:
    """The form to publish a new version, filled with the current one (change the text, the licence or both)."""
    current = study_service.current_data_use_agreement(study)
    return DataUseAgreementForm(initial={"text": current.text, "licence": current.licence} if current else None)


@require_POST
@study_view(COORDINATOR)
def publish_agreement(request: HttpRequest, study) -> HttpResponse:
    form = DataUseAgreementForm(request.POST)
    if form.is_valid():
        agreement = _attempt(form, "text", study_service.publish_data_use_agreement, request.user, study,
                             text=form.cleaned_data["text"], licence=form.cleaned_data["licence"])
        if agreement:
            messages.success(request, f"Data-use agreement v{agreement.version} published.")
            return redirect("study-settings", study.code)
    return _settings_page(request, study, agreement_form=form)


# --- headsets ---------------------------------------------------------------------------------


class HeadsetFilter(RenderedOnce, forms.Form):
    q = forms.CharField(required=False, max_length=128, label="Headset ID contains")
    retired = forms.ChoiceField(required=False, label="In use",
                                choices=[("", "in use and retired"), ("no", "in use"), ("yes", "retired")])

    def apply(self, headsets):
        if not self.is_valid():
            return headsets.none()
        if self.cleaned_data["q"].strip():
            headsets = headsets.filter(headset_id__icontains=self.cleaned_data["q"].strip())
        if self.cleaned_data["retired"]:
            headsets = headsets.filter(retired_on__isnull=self.cleaned_data["retired"] == "no")
        return headsets


# One row of the headsets table and its retire form (the text the template's loop printed, escaped as it escaped).
HEADSET_ROW = """
    <tr data-headset="{headset_id}">
      <td><code>{headset_id}</code></td>
      <td>{model}</td>
      <td>{registered} by {registered_by}</td>
      <td>
        <form method="post" action="{url}{pk}/assigned-on/" class="inline-form">{csrf}
          <input type="date" name="assigned_on" value="{assigned_on}" max="{registered_on}" aria-label="In the study since" required>
          <button type="submit">Change</button>
        </form></td>
      <td>{retired_on}</td>
      <td>{retire}</td>
    </tr>
    """  # noqa: E501  (the line of the date input, as the template had it)
RETIRE_FORM = """
        <form method="post" action="{url}{pk}/retire/" class="inline-form">{csrf}
          <input type="date" name="retired_on" value="{retire_on}" aria-label="Retire on" required>
          <button type="submit">Retire</button>
        </form>"""
HEADSET_COLUMNS = ("pk", "headset_id", "model", "registered_at", "assigned_on", "retired_on", "registered_by__username")


def headset_rows(rows, headsets_url: str, csrf_token: str, retire_on: str) -> list[str]:
    """The headsets list's rows as HTML, made once per row in Python from ``HEADSET_COLUMNS`` (``core.display``); a
    headset's forms post to ``headsets_url`` plus its own path (urls.py), one reverse() per list."""
    csrf = display.csrf_input(csrf_token)
    return [display.row_html(HEADSET_ROW, headset_id=row.headset_id, model=row.model or "—",
        registered=display.minute(row.registered_at, ""), registered_by=str(row.registered_by__username),
        url=headsets_url, pk=row.pk, csrf=csrf,
        assigned_on=row.assigned_on.isoformat() if row.assigned_on else "",
        registered_on=display.day(row.registered_at),
        retired_on=formats.localize(row.retired_on) if row.retired_on else "—",
        retire="" if row.retired_on else display.row_html(RETIRE_FORM, url=headsets_url, pk=row.pk, csrf=csrf,
                                                     retire_on=retire_on),
    ) for row in rows]


def _headsets_page(request, study, *, form=None, import_form=None, import_errors=None) -> HttpResponse:
    failed = form is not None or import_form is not None
    filters = HeadsetFilter(request.GET)
    page = list_page(request, filters.apply(Headset.objects.all()), ("headset_id",), columns=HEADSET_COLUMNS)
    csrf_token = display.csrf_token(request)
    retire_on = timezone.localdate().isoformat()  # the rows' retire forms propose today
    return render(request, "studies/headsets.html", {
        "study": study,
        "filters": filters,
        "page": page, "rows": headset_rows(page.rows, reverse("study-headsets", args=[study.code]), csrf_token,
                                           retire_on),
        "csrf_token": csrf_token,
        "form": form or HeadsetForm(),
        "import_form": import_form or HeadsetImportForm(),
        "import_errors": import_errors,
    }, status=400 if failed else 200)


@study_view(COORDINATOR)
def headsets(request: HttpRequest, study) -> HttpResponse:
    if request.method != "POST":
        return _headsets_page(request, study)
    form = HeadsetForm(request.POST)
    if form.is_valid():
        headset = _attempt(form, "headset_id", headset_service.register_headset, request.user, study,
                           headset_id=form.cleaned_data["headset_id"], model=form.cleaned_data["model"],
                           assigned_on=form.cleaned_data["assigned_on"])
        if headset:
            messages.success(request, f"Headset {headset.headset_id} registered.")
            return redirect("study-headsets", study.code)
    return _headsets_page(request, study, form=form)


@require_POST
@study_view(COORDINATOR)
def import_headsets(request: HttpRequest, study) -> HttpResponse:
    form = HeadsetImportForm(request.POST, request.FILES)
    if form.is_valid():
        with refusals(form=form, field="csv_file") as outcome:
            imported = headset_service.import_headsets_csv(request.user, study, form.cleaned_data["csv_file"])
        if not outcome.refused:
            messages.success(request, f"{len(imported)} headsets imported.")
            return redirect("study-headsets", study.code)
        if isinstance(outcome.error, HeadsetImportError):
            return _headsets_page(request, study, import_form=form, import_errors=outcome.error.errors)
    return _headsets_page(request, study, import_form=form)


def _date_of_headset(request: HttpRequest, study, headset_pk: int, form_class: type[forms.Form], service: Callable,
                     done: Callable[[Headset], str]) -> HttpResponse:
    """A headset row's one-date form: the service called with the date, then the headsets page with ``done`` or
    the refusal as a message."""
    headset = get_object_or_404(Headset, pk=headset_pk)
    form = form_class(request.POST)
    (field,) = form.fields
    if form.is_valid() and _attempt(form, field, service, request.user, headset, form.cleaned_data[field]):
        messages.success(request, done(headset))
    else:
        messages.error(request, f"Headset {headset.headset_id}: "
                                f"{' '.join(e for errors in form.errors.values() for e in errors)}")
    return redirect("study-headsets", study.code)


@require_POST
@study_view(COORDINATOR)
def assign_headset(request: HttpRequest, study, headset_pk: int) -> HttpResponse:
    return _date_of_headset(request, study, headset_pk, AssignHeadsetForm, headset_service.declare_assigned_on,
                            lambda headset: f"Headset {headset.headset_id} is the study's since {headset.assigned_on}.")


@require_POST
@study_view(COORDINATOR)
def retire_headset(request: HttpRequest, study, headset_pk: int) -> HttpResponse:
    return _date_of_headset(request, study, headset_pk, RetireHeadsetForm, headset_service.retire_headset,
                            lambda headset: f"Headset {headset.headset_id} retired from {headset.retired_on}.")


# Typed filters of other lists (the recordings') ask these for suggestions.
@study_view(COORDINATOR, ETHICS)
def suggest_headsets(request: HttpRequest, study) -> HttpResponse:
    return suggestion_response(request, Headset.objects.all(), "headset_id")


@study_view(COORDINATOR, ETHICS)
def suggest_demonstrators(request: HttpRequest, study) -> HttpResponse:
    return suggestion_response(request, Demonstrator.objects.all(), "designator")


# --- demonstrators ----------------------------------------------------------------------------


class DemonstratorFilter(RenderedOnce, forms.Form):
    q = forms.CharField(required=False, max_length=100, label="Designator contains")

    def apply(self, demonstrators):
        if not self.is_valid():
            return demonstrators.none()
        if self.cleaned_data["q"].strip():
            demonstrators = demonstrators.filter(
                designator__contains=demonstrator_service.normalise_designator(self.cleaned_data["q"]))
        return demonstrators


def _consent_counts(pks: list[int]) -> dict[tuple[int, str], int]:
    """Consent events given and withdrawn of the page's demonstrators (by pk and kind), in one grouped query."""
    counts = ConsentEvent.objects.filter(demonstrator__in=pks).values("demonstrator", "kind").annotate(n=Count("pk"))
    return {(row["demonstrator"], row["kind"]): row["n"] for row in counts}


# One row of the demonstrators table (the text the template's loop printed, escaped as it escaped).
DEMONSTRATOR_ROW = """
    <tr>
      <td><a href="{url}{pk}/"><code>{designator}</code></a></td>
      <td>{headset}</td>
      <td>{given} given{withdrawn}</td>
      <td>{registered}</td>
    </tr>
    """


def demonstrator_rows(rows, demonstrators_url: str) -> list[str]:
    """The demonstrators list's rows as HTML, made once per row (``core.display``) from named rows of ``pk``,
    ``designator``, ``created_at`` and ``headset__headset_id``; a demonstrator's page is ``demonstrators_url`` plus
    its pk (urls.py)."""
    counts = _consent_counts([row.pk for row in rows])
    html = []
    for row in rows:
        withdrawn = counts.get((row.pk, ConsentEvent.Kind.WITHDRAWN), 0)
        html.append(display.row_html(DEMONSTRATOR_ROW, url=demonstrators_url, pk=row.pk, designator=row.designator,
            headset=row.headset__headset_id or "—", given=counts.get((row.pk, ConsentEvent.Kind.GIVEN), 0),
            withdrawn=format_html(', <span class="error">{} withdrawn</span>', withdrawn) if withdrawn else "",
            registered=display.day(row.created_at)))
    return html


def _demonstrators_page(request, study, *, form=None) -> HttpResponse:
    active = Headset.objects.filter(retired_on__isnull=True)
    filters = DemonstratorFilter(request.GET)
    page = list_page(request, filters.apply(Demonstrator.objects.all()), ("designator",),
                     columns=("pk", "designator", "created_at", "headset__headset_id"))
    return render(request, "studies/demonstrators.html", {
        "study": study,
        "filters": filters,
        "page": page, "rows": demonstrator_rows(page.rows, reverse("study-demonstrators", args=[study.code])),
        "can_edit": COORDINATOR in request.study_roles,
        "form": form or DemonstratorForm(headsets=active,
                                         suggest_url=reverse("study-suggest-headsets", args=[study.code])),
    }, status=400 if form is not None else 200)


@study_view(COORDINATOR, ETHICS)
def demonstrators(request: HttpRequest, study) -> HttpResponse:
    return _demonstrators_page(request, study)


@require_POST
@study_view(COORDINATOR)
def create_demonstrator(request: HttpRequest, study) -> HttpResponse:
    form = DemonstratorForm(request.POST, headsets=Headset.objects.filter(retired_on__isnull=True),
                            suggest_url=reverse("study-suggest-headsets", args=[study.code]))
    if form.is_valid():
        # The Generate button ignores anything typed into the designator field.
        typed = "" if "generate" in request.POST else form.cleaned_data["designator"]
        demonstrator = _attempt(form, "designator", demonstrator_service.create_demonstrator, request.user, study,
                                designator=typed, headset=form.cleaned_data["headset"])
        if demonstrator:
            messages.success(request, f"Demonstrator {demonstrator.designator} registered.")
            return redirect("study-demonstrator", study.code, demonstrator.pk)
    return _demonstrators_page(request, study, form=form)


def demonstrator_page(request, study, demonstrator, *, consent_form=None, withdrawal_form=None) -> HttpResponse:
    """The demonstrator's consent history and coverage, with the consent and withdrawal forms (a refused one with
    its errors, answered 400). Its withdrawal form posts to research's view (``research/views/withdrawals.py``):
    a withdrawal reaches released data, which the registry does not hold."""
    today = timezone.localdate()
    return render(request, "studies/demonstrator.html", {
        "study": study,
        "demonstrator": demonstrator,
        "events": demonstrator.consent_events.select_related("document", "recorded_by").order_by("event_date", "pk"),
        "coverage": [(label, consent_service.consent_coverage(demonstrator, today, value))
                     for value, label in ConsentEvent.Scope.choices],
        "today": today,
        "can_edit": COORDINATOR in request.study_roles,
        "consent_form": consent_form or ConsentForm(documents=ConsentDocument.objects.all(),
                                                    initial={"consent_date": today}),
        "withdrawal_form": withdrawal_form or WithdrawalForm(initial={"withdrawal_date": today}),
    }, status=400 if consent_form is not None or withdrawal_form is not None else 200)


@study_view(COORDINATOR, ETHICS)
def demonstrator_detail(request: HttpRequest, study, demonstrator_pk: int) -> HttpResponse:
    return demonstrator_page(request, study, get_object_or_404(Demonstrator, pk=demonstrator_pk))


@require_POST
@study_view(COORDINATOR)
def give_consent(request: HttpRequest, study, demonstrator_pk: int) -> HttpResponse:
    demonstrator = get_object_or_404(Demonstrator, pk=demonstrator_pk)
    form = ConsentForm(request.POST, documents=ConsentDocument.objects.all())
    if form.is_valid() and _attempt(form, "consent_date", consent_service.give_consent, request.user, demonstrator,
                                    document=form.cleaned_data["document"],
                                    consent_date=form.cleaned_data["consent_date"],
                                    scopes=form.cleaned_data["scopes"]):
        messages.success(request, f"Consent recorded for {demonstrator.designator}.")
        return redirect("study-demonstrator", study.code, demonstrator.pk)
    return demonstrator_page(request, study, demonstrator, consent_form=form)


# --- consent documents ------------------------------------------------------------------------


def _documents_page(request, study, *, form=None) -> HttpResponse:
    documents = ConsentDocument.objects.select_related("uploaded_by", "accepted_by")
    return render(request, "studies/consent_documents.html", {
        "study": study,
        "pending": [d for d in documents if not d.is_accepted],
        "accepted": [d for d in documents if d.is_accepted],
        "can_upload": COORDINATOR in request.study_roles,
        "can_accept": ETHICS in request.study_roles,
        "form": form or ConsentDocumentForm(),
    }, status=400 if form is not None else 200)


@study_view(COORDINATOR, ETHICS)
def consent_documents(request: HttpRequest, study) -> HttpResponse:
    return _documents_page(request, study)


@require_POST
@study_view(COORDINATOR)
def upload_consent_document(request: HttpRequest, study) -> HttpResponse:
    form = ConsentDocumentForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        document = _attempt(form, "document", consent_service.upload_consent_document, request.user, study,
                            identifier=data["identifier"], version=data["version"], issued_on=data["issued_on"],
                            uploaded_file=data["document"])
        if document:
            messages.success(request, f"Consent document {document} uploaded; it awaits an ethics officer.")
            return redirect("study-consent-documents", study.code)
    return _documents_page(request, study, form=form)


@study_view(COORDINATOR, ETHICS)
def consent_document_file(request: HttpRequest, study, document_pk: int) -> FileResponse:
    document = get_object_or_404(ConsentDocument, pk=document_pk)
    extension = document.file_name.rsplit(".", 1)[-1]
    return FileResponse(consent_service.open_consent_document(document), content_type=document.media_type,
                        as_attachment=extension != "txt",
                        filename=f"{document.identifier}-v{document.version}.{extension}")


@require_POST
@study_view(ETHICS)
def accept_consent_document(request: HttpRequest, study, document_pk: int) -> HttpResponse:
    document = get_object_or_404(ConsentDocument, pk=document_pk)
    with refusals(request) as outcome:
        consent_service.accept_consent_document(request.user, document)
    if not outcome.refused:
        messages.success(request, f"Consent document {document} accepted.")
    return redirect("study-consent-documents", study.code)
