"""Recording pages: list with filters and the upload form, detail with its export log, episodes per study."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core.errors import refusals
from portal.recordings.models import Alert, Episode, Recording
from portal.recordings.quarantine import registry_fixes
from portal.recordings.services import export, ingest
from portal.studies.models import Demonstrator, Headset

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER


class RecordingFilter(forms.Form):
    state = forms.ChoiceField(choices=[("", "any state"), *Recording.State.choices], required=False)
    headset = forms.ModelChoiceField(queryset=Headset.objects.none(), required=False, empty_label="any headset")
    demonstrator = forms.ModelChoiceField(queryset=Demonstrator.objects.none(), required=False,
                                          empty_label="any demonstrator")
    recorded_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    recorded_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["headset"].queryset = Headset.objects.all()
        self.fields["demonstrator"].queryset = Demonstrator.objects.all()

    def apply(self, recordings):
        if not self.is_valid():
            return recordings.none()
        data = self.cleaned_data
        if data["state"]:
            recordings = recordings.filter(state=data["state"])
        if data["headset"]:
            recordings = recordings.filter(headset=data["headset"])
        if data["demonstrator"]:
            recordings = recordings.filter(demonstrator=data["demonstrator"])
        if data["recorded_from"]:
            recordings = recordings.filter(recorded_at__date__gte=data["recorded_from"])
        if data["recorded_to"]:
            recordings = recordings.filter(recorded_at__date__lte=data["recorded_to"])
        return recordings


class UploadForm(forms.Form):
    source = forms.FileField(label="Capture source (ZIP archive of the source folder)")


@study_view(COORDINATOR, ETHICS)
def recording_list(request: HttpRequest, study) -> HttpResponse:
    filters = RecordingFilter(request.GET or None)
    recordings = Recording.objects.select_related("headset", "demonstrator", "episode")
    if request.GET:
        recordings = filters.apply(recordings)
    return render(request, "recordings/list.html", {
        "study": study, "filters": filters, "recordings": recordings[:500],
        "upload_form": UploadForm() if COORDINATOR in request.study_roles else None,
    })


@require_POST
@study_view(COORDINATOR)
def upload(request: HttpRequest, study) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES)
    wants_json = request.headers.get("Accept", "").startswith("application/json")
    if not form.is_valid():
        if wants_json:
            return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
        messages.error(request, "Choose a capture source ZIP to upload.")
        return redirect("recording-list", study.code)
    source = form.cleaned_data["source"]
    recording = ingest.receive_upload(request.user, study, source, name=source.name, via="upload")
    url = reverse("recording-detail", args=[study.code, recording.uid])
    if wants_json:
        return JsonResponse({"uid": str(recording.uid), "url": url}, status=201)
    return redirect(url)


def _recording(uid) -> Recording:
    return get_object_or_404(Recording.objects.select_related("headset", "demonstrator"), uid=uid)


@study_view(COORDINATOR, ETHICS)
def recording_detail(request: HttpRequest, study, uid) -> HttpResponse:
    recording = _recording(uid)
    episode = Episode.objects.filter(recording=recording).first()
    return render(request, "recordings/detail.html", {
        "study": study, "recording": recording, "episode": episode,
        "log": recording.log.all(), "purges": recording.purge_receipts.all(),
        "verifications": episode.verifications.all()[:10] if episode else [],
        "can_act": COORDINATOR in request.study_roles,
        "fixes": registry_fixes(recording, request.study_roles),
        "source_read": bool(recording.capture_id),
        "in_progress": recording.in_flight,
    })


@study_view(COORDINATOR, ETHICS)
def recording_status(request: HttpRequest, study, uid) -> JsonResponse:
    recording = _recording(uid)
    return JsonResponse({"state": recording.state, "label": recording.get_state_display(),
                         "progress": recording.progress, "note": recording.progress_note,
                         "reason": recording.reason})


@require_POST
@study_view(COORDINATOR)
def recheck(request: HttpRequest, study, uid) -> HttpResponse:
    recording = _recording(uid)
    with refusals(request) as outcome:
        ingest.recheck(request.user, recording)
    if not outcome.refused and recording.state == Recording.State.QUARANTINED:
        messages.error(request, f"Still quarantined: {recording.reason}")
    elif not outcome.refused:
        messages.success(request, "The registry now covers this recording; its export is queued.")
    return redirect("recording-detail", study.code, recording.uid)


@require_POST
@study_view(COORDINATOR)
def register_demonstrator(request: HttpRequest, study, uid) -> HttpResponse:
    recording = _recording(uid)
    with refusals(request) as outcome:
        demonstrator = ingest.register_demonstrator(request.user, recording)
    if not outcome.refused:
        messages.success(request, f"Demonstrator {demonstrator} registered for this recording. Record their "
                                  f"consent, then re-check the recording.")
    return redirect("recording-detail", study.code, recording.uid)


@require_POST
@study_view(COORDINATOR)
def retry(request: HttpRequest, study, uid) -> HttpResponse:
    recording = _recording(uid)
    with refusals(request) as outcome:
        export.retry_export(request.user, recording)
    if not outcome.refused:
        messages.success(request, "Export queued again.")
    return redirect("recording-detail", study.code, recording.uid)


@study_view(COORDINATOR, ETHICS)
def episode_list(request: HttpRequest, study) -> HttpResponse:
    return render(request, "recordings/episodes.html", {
        "study": study,
        "episodes": Episode.objects.select_related("recording", "recording__demonstrator", "recording__headset"),
        "alerts": Alert.objects.filter(resolved_at__isnull=True).select_related("episode"),
    })
