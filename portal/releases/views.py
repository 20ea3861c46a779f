"""Release pages: requests by state, a new request (episodes chosen by filters or by hand), a request with its
gate checklist, approvals, manifest and signature status, the review viewer per episode, and the public key."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from exporter.jsonfile import json_bytes
from exporter.release import MANIFEST, SIGNATURE
from portal.access.models import Role
from portal.access.permissions import study_view
from portal.accounts.network import client_ip
from portal.accounts.services import note_second_factor_passed, second_factor_passed_at
from portal.core import display, integers, signing
from portal.core.errors import refusals
from portal.core.forms import date_input
from portal.core.pagination import list_page
from portal.releases import face_review
from portal.releases.made_by import made_by_withdrawal
from portal.releases.models import Approval, EpisodeTag, ReleaseItem, ReleaseRequest
from portal.releases.services import approval, gate, manifest, publish, release_requests
from portal.releases.viewer import Viewer
from portal.studies.models import Demonstrator, Headset

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER
State = ReleaseRequest.State
# The lists' orders (each served by an index of its model: release requests by (study, number), the unique
# constraint, by (study, state, number) and (study, requested_by, number), episodes by (study, receipt_status,
# episode_index)).
REQUEST_ORDER = ("-number",)
EPISODE_ORDER = ("episode_index",)


def _release(number: int) -> ReleaseRequest:
    return get_object_or_404(ReleaseRequest.objects.select_related("study", "requested_by", "rejected_by",
                                                                   "supersedes"), number=number)


def _approval_count():
    """Each listed request's approvals, counted by a subquery of its own: a join with GROUP BY would aggregate
    every request of the study before the page's LIMIT, so no index could serve the list's order."""
    approvals = (Approval.objects.filter(request=OuterRef("pk")).order_by().values("request")
                 .annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(approvals, output_field=IntegerField()), 0)


# One row of the release requests table (the text the template's loop printed, escaped as it escaped).
REQUEST_ROW = """
    <tr data-number="{number}"{attention}>
      <td class="ident"><a href="{url}{number}/">release-{release}</a></td>
      <td>{state}{awaits}</td>
      <td>{episodes}</td>
      <td>{approvals} of {required}</td>
      <td class="ident long">{created} by {by}</td>
      <td>{purpose}</td>
    </tr>
    """
REQUEST_COLUMNS = ("pk", "number", "state", "purpose", "created_at", "episode_count", "approvals_required",
                   "requested_by_id", "requested_by__username", "supersedes_id", "rejected_by_id", "approval_count")
STATE_LABEL = display.labels(State.choices)
ATTENTION, AWAITS = SafeString(' class="attention"'), SafeString(" <small>awaits you</small>")  # a row awaiting you


def request_rows(rows, study, waiting: set[int], releases_url: str) -> list[str]:
    """The release requests list's rows as HTML, made once per row in Python (``core.display``) from named rows of
    ``REQUEST_COLUMNS``: the state badge of ``releases/_state.html`` (with its file's newline), a request's page at
    ``releases_url`` plus its number."""
    html = []
    for r in rows:
        # ReleaseRequest.withdrawn_by_requester: rejected by its own requester.
        withdrawn = r.state == State.REJECTED and r.rejected_by_id is not None and r.rejected_by_id == r.requested_by_id
        label = "Withdrawn by the requester" if withdrawn else STATE_LABEL(r.state)
        html.append(display.row_html(
            REQUEST_ROW, number=str(r.number), url=releases_url, release=f"{r.number:04d}",
            attention=ATTENTION if r.pk in waiting else "",
            state=display.row_html('<span class="status status-{state}" data-state="{state}">{label}</span>\n',
                                   state=r.state, label=label),
            awaits=AWAITS if r.pk in waiting else "",
            episodes=str(r.episode_count), approvals=str(r.approval_count),
            required=str(r.approvals_required or study.approvals_required or ""),
            created=display.minute(r.created_at, ""),
            by="a withdrawal" if r.supersedes_id else str(r.requested_by__username),
            purpose=display.chars(r.purpose, 90),
        ))
    return html


@study_view(COORDINATOR, ETHICS)
def release_list(request: HttpRequest, study) -> HttpResponse:
    state = request.GET.get("state", "")
    if state and state not in State.values:
        state = ""
    mine = request.GET.get("mine") == "1"
    requests_ = ReleaseRequest.objects.all()
    base = ReleaseRequest.objects.filter(requested_by=request.user) if mine else ReleaseRequest.objects.all()
    counts = dict(base.values_list("state").annotate(n=Count("pk")).order_by())
    if mine:
        requests_ = requests_.filter(requested_by=request.user)
    if state:
        requests_ = requests_.filter(state=state)
    page = list_page(request, requests_.annotate(approval_count=_approval_count()), REQUEST_ORDER,
                     columns=REQUEST_COLUMNS)
    waiting = approval.awaiting_officer_pks(request.user) \
        if ETHICS in request.study_roles else set()
    return render(request, "releases/list.html", {
        "study": study, "page": page, "state": state, "mine": mine, "waiting": waiting,
        "rows": request_rows(page.rows, study, waiting, reverse("release-list", args=[study.code])),
        "states": [(value, label, counts.get(value, 0)) for value, label in State.choices],
        "total": sum(counts.values()), "can_request": COORDINATOR in request.study_roles,
    })


class EpisodeFilter(forms.Form):
    task = forms.ChoiceField(required=False)
    outcome = forms.ChoiceField(required=False)
    headset = forms.ModelChoiceField(queryset=Headset.objects.none(), required=False, empty_label="any headset")
    demonstrator = forms.ModelChoiceField(queryset=Demonstrator.objects.none(), required=False,
                                          empty_label="any demonstrator")
    recorded_from = forms.DateField(required=False, widget=date_input())
    recorded_to = forms.DateField(required=False, widget=date_input())
    state = forms.ChoiceField(required=False, label="Release state", choices=[
        ("", "any"), ("unrequested", "in no release request yet"), ("requested", "in an open or released request")])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["headset"].queryset = Headset.objects.all()
        self.fields["demonstrator"].queryset = Demonstrator.objects.all()
        for kind in EpisodeTag.Kind.values:
            values = EpisodeTag.objects.filter(kind=kind).values_list("value", flat=True).distinct().order_by("value")
            self.fields[kind].choices = [("", f"any {kind}"), *((value, value) for value in values)]

    def apply(self, episodes):
        if not self.is_valid():
            return episodes.none()
        data = self.cleaned_data
        for kind in EpisodeTag.Kind.values:
            if data[kind]:
                episodes = episodes.filter(tags__kind=kind, tags__value=data[kind])
        if data["headset"]:
            episodes = episodes.filter(recording__headset=data["headset"])
        if data["demonstrator"]:
            episodes = episodes.filter(recording__demonstrator=data["demonstrator"])
        if data["recorded_from"]:
            episodes = episodes.filter(recording__recorded_at__date__gte=data["recorded_from"])
        if data["recorded_to"]:
            episodes = episodes.filter(recording__recorded_at__date__lte=data["recorded_to"])
        live = ReleaseItem.objects.exclude(request__state__in=[State.REJECTED, State.FAILED]).values("episode")
        if data["state"] == "unrequested":
            episodes = episodes.exclude(pk__in=live)
        elif data["state"] == "requested":
            episodes = episodes.filter(pk__in=live)
        return episodes.distinct()


class RequestForm(forms.Form):
    purpose = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}),
                              max_length=release_requests.PURPOSE_MAX_CHARS,
                              help_text="What the episodes are released for, and to whom.")


def _candidates(filters: EpisodeFilter):
    episodes = release_requests.releasable_episodes().select_related("recording__headset",
                                                                     "recording__demonstrator").only(
        "episode_index", "length", "study_id", "recording__capture_id", "recording__recorded_at",
        "recording__headset__headset_id", "recording__demonstrator__designator")
    return filters.apply(episodes)


@study_view(COORDINATOR)
def release_new(request: HttpRequest, study) -> HttpResponse:
    """Choose verified episodes (filters, then all matching or ticked by hand) and ask for their release."""
    filters = EpisodeFilter(request.GET if request.method == "GET" else request.POST)
    form = RequestForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        if request.POST.get("all_matching") == "1":
            chosen = list(_candidates(filters).order_by(*EPISODE_ORDER))
        else:
            indexes = [integers.parse_int(value, "an episode index") for value in request.POST.getlist("episodes")
                       if value]
            chosen = list(release_requests.releasable_episodes().filter(episode_index__in=indexes))
        with refusals(request, form=form) as outcome:
            made = release_requests.create_request(request.user, study, episodes=chosen,
                                                   purpose=form.cleaned_data["purpose"])
        if not outcome.refused:
            messages.success(request, f"{made.release_id} drafted with {made.episode_count} episode(s). The stored "
                                      f"shards are being read for the gate; submit it once every check passes.")
            return redirect("release-detail", study.code, made.number)
    page = list_page(request, _candidates(filters), EPISODE_ORDER)
    requested: dict[int, list[str]] = {}
    for episode_id, number in (ReleaseItem.objects.filter(episode__in=[episode.pk for episode in page.rows])
                               .exclude(request__state__in=[State.REJECTED, State.FAILED])
                               .values_list("episode_id", "request__number").order_by("request__number")):
        requested.setdefault(episode_id, []).append(f"release-{number:04d}")
    for episode in page.rows:
        episode.requested_in = requested.get(episode.pk, [])
    return render(request, "releases/new.html", {
        "study": study, "filters": filters, "form": form, "page": page
    }, status=400 if form.errors else 200)


def _detail_context(request: HttpRequest, study, release: ReleaseRequest) -> dict:
    roles = request.study_roles
    checklist = gate.evaluate(release)
    approvals = list(release.approvals.select_related("officer"))
    user = request.user
    return {
        "study": study, "release_request": release, "gate": checklist, "approvals": approvals,
        "release": getattr(release, "release", None),
        "is_requester": user.pk == release.requested_by_id,
        "is_officer": ETHICS in roles,
        "can_submit": COORDINATOR in roles and release.state == State.DRAFT,
        "can_approve": (ETHICS in roles and release.state == State.AWAITING_APPROVAL
                        and user.pk != release.requested_by_id
                        and not any(a.officer_id == user.pk for a in approvals)),
        "can_reject": (release.state in ReleaseRequest.OPEN
                       and (ETHICS in roles or user.pk == release.requested_by_id)),
        "can_retry": release.state == State.FAILED,
        "second_factor_needed": approval.second_factor_required(study),
        "second_factor_minutes": settings.CERES_APPROVAL_SECOND_FACTOR_MINUTES,
        "in_progress": release.state in (State.APPROVED, State.RELEASING) or checklist.pending,
        "public_key_fingerprint": signing.key_fingerprint(),
        "superseded_by": ReleaseRequest.objects.filter(supersedes=release).only("number").first(),
        "made_by_withdrawal": made_by_withdrawal(release),
        "carried_approvals": (release.superseding or {}).get("carried_approvals") or [],
    }


@never_cache
@study_view(COORDINATOR, ETHICS)
def release_detail(request: HttpRequest, study, number: int) -> HttpResponse:
    return render(request, "releases/detail.html", _detail_context(request, study, _release(number)))


@study_view(COORDINATOR, ETHICS)
def release_status(request: HttpRequest, study, number: int) -> JsonResponse:
    release = _release(number)
    executed = getattr(release, "release", None)
    return JsonResponse({
        "state": release.state, "label": release.get_state_display(),
        "gate_pending": release.items.filter(inspected_at__isnull=True).exists(),
        "objects_copied": executed.objects_copied if executed else 0,
        "objects_total": executed.objects_total if executed else 0,
        "progress_note": executed.progress_note if executed else "",
        "last_error": executed.last_error if executed else "",
    })


def _act(request: HttpRequest, study, number: int, service, success: str) -> HttpResponse:
    release = _release(number)
    with refusals(request) as outcome:
        service(release)
    if not outcome.refused:
        messages.success(request, success.format(release_id=release.release_id))
    return redirect("release-detail", study.code, number)


@require_POST
@study_view(COORDINATOR)
def release_submit(request: HttpRequest, study, number: int) -> HttpResponse:
    return _act(request, study, number, lambda r: release_requests.submit(request.user, r),
                "{release_id} submitted: it now waits for the ethics officers' approval.")


@require_POST
@study_view(ETHICS)
def release_approve(request: HttpRequest, study, number: int) -> HttpResponse:
    evidence = approval.SecondFactor(passed_at=second_factor_passed_at(request.session),
                                     code=request.POST.get("code", ""), ip=client_ip(request))
    release = _release(number)
    with refusals(request) as outcome:
        approval.approve(request.user, release, manifest_sha256=request.POST.get("manifest_sha256", ""),
                         second_factor=evidence)
    if not outcome.refused:
        if evidence.code:
            note_second_factor_passed(request.session)
        release.refresh_from_db()
        last = release.state != State.AWAITING_APPROVAL
        messages.success(request, f"You approved {release.release_id}."
                                  + (" That was the last approval needed: the release is queued." if last else ""))
    return redirect("release-detail", study.code, number)


@require_POST
@study_view(COORDINATOR, ETHICS)
def release_reject(request: HttpRequest, study, number: int) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _act(request, study, number, lambda r: release_requests.reject(request.user, r, reason=reason),
                "{release_id} rejected; it is closed.")


@require_POST
@study_view(COORDINATOR, ETHICS)
def release_reverify(request: HttpRequest, study, number: int) -> HttpResponse:
    return _act(request, study, number, lambda r: release_requests.reverify(request.user, r),
                "The shards of {release_id} are being re-verified against their receipts.")


@require_POST
@study_view(COORDINATOR, ETHICS)
def release_retry(request: HttpRequest, study, number: int) -> HttpResponse:
    return _act(request, study, number, lambda r: publish.retry_release(request.user, r),
                "{release_id} is queued again; objects already in place are kept.")


@study_view(COORDINATOR, ETHICS)
def release_manifest(request: HttpRequest, study, number: int) -> HttpResponse:
    """The signed manifest once released; before that, the manifest section officers approve (its SHA-256 is
    the request's manifest digest)."""
    release = _release(number)
    executed = getattr(release, "release", None)
    if executed is not None and executed.manifest:
        data, name = bytes(executed.manifest), MANIFEST
    else:
        data, name = json_bytes(manifest.section(release)), f"{release.release_id}-proposed.json"
    response = HttpResponse(data, content_type="application/json")
    response["Content-Disposition"] = f'inline; filename="{name}"'
    return response


@study_view(COORDINATOR, ETHICS)
def release_signature(request: HttpRequest, study, number: int) -> HttpResponse:
    release = _release(number)
    executed = getattr(release, "release", None)
    if executed is None or not executed.signature:
        raise Http404("the manifest is not signed yet")
    response = HttpResponse(bytes(executed.signature), content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="{SIGNATURE}"'
    return response


# --- the review viewer ------------------------------------------------------------------------------


def _item(number: int, episode_index: int) -> ReleaseItem:
    return get_object_or_404(ReleaseItem.objects.select_related("request", "episode__recording"),
                             request__number=number, episode_index=episode_index)


# The stored shards, as the officers review them (the headset named, no check beyond the page's roles).
REVIEW = Viewer(route="release-episode", template="releases/episode.html", headset=True, released=False,
                items=lambda release: ReleaseItem.objects.filter(request=release))


@study_view(COORDINATOR, ETHICS)
def release_episode(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    item = _item(number, episode_index)
    checklist = gate.evaluate(item.request, item=item).episodes[0]
    return REVIEW.page(request, study, item, checks=checklist.checks, **face_review.section(request, study, item))


@study_view(COORDINATOR, ETHICS)
def release_episode_data(request: HttpRequest, study, number: int, episode_index: int) -> JsonResponse:
    return REVIEW.data(request, _item(number, episode_index))


@study_view(COORDINATOR, ETHICS)
def release_episode_video(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    """The shard's video from the shards storage, with HTTP Range (browsers seek with it)."""
    return REVIEW.video(request, _item(number, episode_index))


def public_key(request: HttpRequest) -> HttpResponse:
    """``/.well-known/ceres-release-key``: the PEM public key that verifies every release manifest (no login)."""
    return HttpResponse(signing.public_key_pem(), content_type="text/plain; charset=us-ascii")

