"""Recording pages: list with filters and the upload form, detail with its export log, episodes per study."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core import display
from portal.core.errors import refusals
from portal.core.forms import RenderedOnce, date_input
from portal.core.pagination import RowCount, count_rows, list_page
from portal.fixity.models import Alert
from portal.recordings.models import LIST_COLUMNS, Episode, Recording
from portal.recordings.quarantine import registry_fixes
from portal.recordings.services import export, ingest
from portal.studies.services.demonstrators import normalise_designator

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER
# The lists' orders: newest first, each served by an index (Recording.Meta.indexes, the episode index's own).
RECORDING_ORDER = ("-created_at", "-pk")
EPISODE_ORDER = ("-episode_index",)
STATE_LABEL, AUDIO_LABEL = display.labels(Recording.State.choices), display.labels(Recording.Audio.choices)
RECEIPT_LABEL = display.labels(Episode.Receipt.choices)


class RecordingFilter(RenderedOnce, forms.Form):
    """The recordings list's filters, kept in the URL. Headset and demonstrator are typed (with suggestions from
    the registry as one types, when scripts run), not chosen from a menu of every one the study has."""

    state = forms.ChoiceField(choices=[("", "any state"), *Recording.State.choices], required=False)
    headset = forms.CharField(required=False, max_length=128, label="Headset ID",
                              widget=forms.TextInput(attrs={"list": "headset-suggestions", "autocomplete": "off",
                                                            "placeholder": "any headset"}))
    demonstrator = forms.CharField(required=False, max_length=100, label="Designator",
                                   widget=forms.TextInput(attrs={"list": "demonstrator-suggestions",
                                                                 "autocomplete": "off",
                                                                 "placeholder": "any demonstrator"}))
    recorded_from = forms.DateField(required=False, widget=date_input())
    recorded_to = forms.DateField(required=False, widget=date_input())

    def __init__(self, *args, study, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["headset"].widget.attrs["data-suggest"] = reverse("study-suggest-headsets", args=[study.code])
        self.fields["demonstrator"].widget.attrs["data-suggest"] = reverse("study-suggest-demonstrators",
                                                                           args=[study.code])

    def apply(self, recordings):
        if not self.is_valid():
            return recordings.none()
        data = self.cleaned_data
        if data["state"]:
            recordings = recordings.filter(state=data["state"])
        if data["headset"].strip():
            recordings = recordings.filter(headset__headset_id=data["headset"].strip())
        if data["demonstrator"].strip():
            recordings = recordings.filter(demonstrator__designator=normalise_designator(data["demonstrator"]))
        # Whole days in the portal's time zone, as a range on the column (an index can serve it).
        if data["recorded_from"]:
            recordings = recordings.filter(recorded_at__gte=_day_start(data["recorded_from"]))
        if data["recorded_to"]:
            recordings = recordings.filter(recorded_at__lt=_day_start(data["recorded_to"] + timedelta(days=1)))
        return recordings


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


class UploadForm(RenderedOnce, forms.Form):
    source = forms.FileField(label="Capture source (ZIP archive of the source folder)")


def _recordings_url(study) -> str:
    """A recording's page is this plus ``<uid>/`` (urls.py): one reverse() per list, not one per row (a tenth of
    the list's rendering time)."""
    return reverse("recording-list", args=[study.code])


def state_badge(recording) -> str:
    """``recordings/_state.html`` built in Python, for a list's 50 rows (the include costs more than the row):
    ``recording`` is a Recording or a row with its ``state`` and ``progress``."""
    progress = f" {recording.progress}%" if recording.state == Recording.State.RUNNING else ""
    # The include's text ends with its file's newline.
    return display.row_html('<span class="status status-{state}" data-state="{state}">{label}{progress}</span>\n',
                            state=recording.state, label=STATE_LABEL(recording.state), progress=progress)


def _label(registered: str | None, claimed: str | None) -> str:
    """``Recording.headset_label`` and ``demonstrator_label`` of a list row."""
    if registered is not None:
        return registered
    return f"{claimed} (not registered)" if claimed else "—"


# One row of the recordings table (the text the template's loop printed for it, escaped as it escaped).
RECORDING_ROW = """
    <tr data-uid="{uid}">
      <td class="ident long"><a href="{url}{uid}/">{name}</a></td>
      <td class="ident">{recorded}</td>
      <td class="ident">{headset}</td>
      <td class="ident long">{demonstrator}</td>
      <td>{state}{reason}</td>
      <td class="ident">{episode}</td>
      <td>{audio}</td>
    </tr>
    """


def recording_rows(rows, recordings_url: str) -> list[str]:
    """The recordings list's rows as HTML, made in Python once per row of ``LIST_COLUMNS``
    (the same text the model's properties, ``date``/``truncatechars`` and the template gave)."""
    return [display.row_html(
        RECORDING_ROW, uid=str(row.uid), url=recordings_url, name=row.capture_id or row.original_name,
        recorded=display.minute(row.recorded_at),
        headset=_label(row.headset__headset_id, row.claimed_headset_id),
        demonstrator=_label(row.demonstrator__designator, row.claimed_demonstrator_id),
        state=state_badge(row),
        reason=(format_html('<br><small class="error">{}</small>', display.chars(row.reason, 140)) if row.reason
                else ""),
        episode="—" if row.episode__episode_index is None else f"episode-{row.episode__episode_index:06d}",
        audio=AUDIO_LABEL(row.audio),
    ) for row in rows]


@study_view(COORDINATOR, ETHICS)
def recording_list(request: HttpRequest, study) -> HttpResponse:
    filters = RecordingFilter(request.GET, study=study)
    page = list_page(request, filters.apply(Recording.objects.listed()), RECORDING_ORDER, columns=LIST_COLUMNS)
    return render(request, "recordings/list.html", {
        "study": study, "filters": filters,
        "page": page, "rows": recording_rows(page.rows, _recordings_url(study)),
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
                         "progress": recording.progress,
                         # Exported: the state says so already; what runs now is the receipt check.
                         "note": ("checking the stored shard against its receipt"
                                  if recording.state == Recording.State.EXPORTED else recording.progress_note),
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


class EpisodeFilter(RenderedOnce, forms.Form):
    receipt = forms.ChoiceField(choices=[("", "any receipt status"), *Episode.Receipt.choices], required=False,
                                label="Receipt")

    def apply(self, episodes):
        if not self.is_valid():
            return episodes.none()
        if self.cleaned_data["receipt"]:
            episodes = episodes.filter(receipt_status=self.cleaned_data["receipt"])
        return episodes


ALERTS_SHOWN = 20


# One row of the episodes table (see ``RECORDING_ROW``).
EPISODE_ROW = """
    <tr>
      <td>{folder}</td>
      <td>{frames}</td>
      <td><a href="{url}{uid}/">{recording}</a></td>
      <td class="ident">{demonstrator}</td>
      <td>{exported}</td>
      <td><span class="status status-{receipt}">{receipt_label}</span></td>
      <td>{audio}</td>
    </tr>
    """
EPISODE_COLUMNS = ("episode_index", "from_index", "length", "exported_at", "receipt_status", "raw_audio_retained",
                   "recording__uid", "recording__capture_id", "recording__original_name",
                   "recording__demonstrator__designator")


def episode_rows(rows, recordings_url: str) -> list[str]:
    """The episodes list's rows as HTML, made once per row from ``EPISODE_COLUMNS`` (see ``recording_rows``)."""
    return [display.row_html(EPISODE_ROW, folder=f"episode-{row.episode_index:06d}",
        frames=f"{row.from_index}\N{EN DASH}{row.from_index + row.length - 1} ({row.length})",
        url=recordings_url, uid=str(row.recording__uid),
        recording=row.recording__capture_id or row.recording__original_name,
        demonstrator=_label(row.recording__demonstrator__designator, None),
        exported=display.minute(row.exported_at, "allocated"), receipt=row.receipt_status,
        receipt_label=RECEIPT_LABEL(row.receipt_status), audio=display.yesno(row.raw_audio_retained),
    ) for row in rows]


@study_view(COORDINATOR, ETHICS)
def episode_list(request: HttpRequest, study) -> HttpResponse:
    filters = EpisodeFilter(request.GET)
    alerts = Alert.objects.filter(kind=Alert.Kind.RECEIPT_MISMATCH, state__in=Alert.UNRESOLVED)
    shown = list(alerts.only("created_at", "message")[:ALERTS_SHOWN])
    page = list_page(request, filters.apply(Episode.objects.all()), EPISODE_ORDER, columns=EPISODE_COLUMNS)
    return render(request, "recordings/episodes.html", {
        "study": study, "filters": filters,
        "page": page, "rows": episode_rows(page.rows, _recordings_url(study)),
        "alerts": shown,
        # Fewer than a full list shown: they are all there is (no count to ask; usually none at all).
        "alert_count": RowCount(len(shown), exact=True) if len(shown) < ALERTS_SHOWN else count_rows(alerts),
    })
