"""Researcher pages: asking for access and accepting the data-use agreement, browsing released episodes, the
read-only review viewer, downloads through signed links, one-dataset downloads; and the study's access
requests, grants and issued links for its coordinators and ethics officers."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, time, timedelta

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_scopes import scope, scopes_disabled

from exporter.release import MANIFEST, SIGNATURE
from portal.access.models import Role
from portal.access.permissions import active_roles, study_view
from portal.core import integers, storage
from portal.core.errors import refusals
from portal.core.forms import date_input
from portal.core.http import ranged_response, served_span
from portal.core.pagination import list_page
from portal.notifications import events
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.releases.services import review
from portal.releases.services.manifest import key_fingerprint
from portal.research.exceptions import AccessRefused, LinkRefused, ResearchError
from portal.research.forms import BrowseFilter
from portal.research.models import AccessRequest, Dataset, DatasetRequester, IssuedLink, Withdrawal
from portal.research.services import access, catalogue, datasets, links, withdrawals
from portal.studies.models import Study
from portal.studies.services.study import current_data_use_agreement

COORDINATOR, ETHICS, RESEARCHER = Role.COORDINATOR, Role.ETHICS_OFFICER, Role.RESEARCHER
# List orders, each served by an index: access requests (study, state, -created_at, -id), links
# (study | user, -issued_at, -id), released episodes (request, episode_index) through ReleaseItem's unique pair.
REQUEST_ORDER = ("-created_at", "-pk")
LINK_ORDER = ("-issued_at", "-pk")
ITEM_ORDER = ("-request_id", "-episode_index")
DATASET_ORDER = ("-requested_at", "-pk")


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


def _absolute(request: HttpRequest, link: links.Link) -> dict:
    url = link.url if "://" in link.url else request.build_absolute_uri(link.url)
    return {"path": link.path, "url": url, "expires_at": link.expires_at.isoformat()}


# --- the researcher's own pages (all studies) -------------------------------------------------------------


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
            try:
                access.check_access(user, grant.study)
                problem = ""
            except AccessRefused as refused:
                problem = str(refused)
            grants.append({"grant": grant, "agreement": agreement, "accepted": accepted, "problem": problem})
        built = list(DatasetRequester.objects.filter(user=user).select_related("dataset__study")[:20])
        recent = list(IssuedLink.objects.filter(user=user).select_related("study", "release", "dataset")
                      .order_by(*LINK_ORDER)[:20])
    return render(request, "research/home.html", {
        "access_requests": requests_, "grants": grants, "open_studies": access.studies_open_to(user),
        "datasets": built, "recent_links": recent,
    })


@login_required
def my_links(request: HttpRequest) -> HttpResponse:
    with scopes_disabled():
        page = list_page(request, IssuedLink.objects.filter(user=request.user).select_related(
            "study", "release", "dataset").defer("dataset__manifest", "dataset__signature"), LINK_ORDER)
    return render(request, "research/links.html", {"page": page, "study": None})


def _fresh_link_form(link_pk: int | None) -> dict | None:
    """What a button asking for a fresh link to the same file posts: the file page of its release or dataset."""
    if link_pk is None:
        return None
    with scopes_disabled():
        link = IssuedLink.objects.select_related("study", "release", "dataset").filter(pk=link_pk).first()
    if link is None:
        return None
    if link.release_id is not None:
        return {"action": reverse("research-release-file", args=[link.study.code, link.release.number]),
                "back": reverse("research-release", args=[link.study.code, link.release.number]),
                "what": f"release {link.release.release_id}", "path": link.path}
    return {"action": reverse("research-dataset-file", args=[link.study.code, link.dataset.number]),
            "back": reverse("research-dataset", args=[link.study.code, link.dataset.number]),
            "what": f"dataset {link.dataset.dataset_id}", "path": link.path}


@never_cache
def download(request: HttpRequest, token: str) -> HttpResponse:
    """A portal download link (local storage): the signed token names the object; no sign-in, like S3's links.
    Serves HTTP Range, so an interrupted download resumes."""
    try:
        target = links.resolve(token)
    except LinkRefused as refused:
        # Answered here, in the portal's layout, rather than as a message left for the next (unrelated) page.
        return render(request, "research/link_refused.html", {
            "error": refused, "fresh": _fresh_link_form(refused.link_pk)}, status=refused.status)
    try:
        size = storage.releases().size(target.object_name)
    except FileNotFoundError:
        raise Http404("this object is no longer stored") from None
    if (span := served_span(request, size)) is not None:
        links.record_fetch(target, span, size)
    return ranged_response(request, storage.releases(), target.object_name, content_type="application/octet-stream",
                           filename=target.filename, size=size)


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
    closed = None
    try:
        access.open_to_requests(study)
    except ResearchError as refused:
        closed = str(refused)
    return render(request, "research/ask.html", {"study": study, "agreement": agreement, "form": form,
                                                 "closed": closed}, status=400 if form.errors else 200)


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


@study_view(COORDINATOR, ETHICS)
def study_links(request: HttpRequest, study) -> HttpResponse:
    rows = IssuedLink.objects.select_related("user", "study", "release", "dataset").defer(
        "dataset__manifest", "dataset__signature")
    who = request.GET.get("researcher", "").strip()
    if who:
        rows = rows.filter(user__username=who)
    page = list_page(request, rows, LINK_ORDER)
    return render(request, "research/links.html", {"page": page, "study": study, "researcher": who})


# --- browsing released episodes ------------------------------------------------------------------------------


def _browse_rows(filters: BrowseFilter):
    return filters.apply(catalogue.released_items().select_related(
        "request", "episode__recording__demonstrator").only(
        "episode_index", "study_id", "request__number", "request__study_id", "episode__length",
        "episode__recording__recorded_at", "episode__recording__capture_id",
        "episode__recording__demonstrator__designator"))


def _checked_access(request: HttpRequest, study) -> str:
    try:
        access.check_access(request.user, study)
    except AccessRefused as refused:
        return str(refused)
    return ""


@study_view(RESEARCHER)
def browse(request: HttpRequest, study) -> HttpResponse:
    filters = BrowseFilter(request.GET)
    page = list_page(request, _browse_rows(filters), ITEM_ORDER)
    return render(request, "research/browse.html", {
        "study": study, "filters": filters, "page": page, "access_problem": _checked_access(request, study),
    })


@study_view(RESEARCHER)
def release_page(request: HttpRequest, study, number: int) -> HttpResponse:
    """A published release: its signed manifest's digest and key, its episodes and every file to download. A
    superseded one says by which release."""
    superseded = ReleaseRequest.objects.filter(number=number, state=ReleaseRequest.State.SUPERSEDED).first()
    if superseded is not None and not catalogue.serving(superseded):
        successor = ReleaseRequest.objects.filter(supersedes=superseded).first()
        if successor is not None and successor.state == ReleaseRequest.State.RELEASED:
            return redirect("research-release", study.code, successor.number)
        return render(request, "research/superseded.html", {
            "study": study, "release_request": superseded, "successor": successor,
            "told": events.withdrawal_messages(request.user, superseded)})
    release_request = catalogue.released_request(number)
    items = list(catalogue.released_items().filter(request=release_request).select_related(
        "episode__recording__demonstrator"))
    return render(request, "research/release.html", {
        "study": study, "release_request": release_request, "release": release_request.release, "items": items,
        "access_problem": _checked_access(request, study), "portal_url": request.build_absolute_uri("/").rstrip("/"),
        "public_key_fingerprint": key_fingerprint(), "manifest_names": [MANIFEST, SIGNATURE],
        "link_seconds": settings.CERES_DOWNLOAD_LINK_SECONDS,
        "successor": ReleaseRequest.objects.filter(supersedes=release_request).first() if superseded else None,
        "told": events.withdrawal_messages(request.user, release_request) if superseded else (),
    })


def _issue_and_redirect(request: HttpRequest, issue: Callable, back: str) -> HttpResponse:
    path = request.POST.get("path", "")
    with refusals(request) as outcome:
        issued = issue([path])
    if outcome.refused:
        return redirect(back)
    return redirect(issued[0].url)


def _links_json(request: HttpRequest, issue: Callable) -> JsonResponse:
    paths = [path for path in request.POST.getlist("path") if path]
    with refusals(request) as outcome:
        issued = issue(paths or None)
    if outcome.refused:
        return JsonResponse({"detail": str(outcome.error)}, status=outcome.error.status)
    return JsonResponse({"links": [_absolute(request, link) for link in issued]})


@require_POST
@study_view(RESEARCHER)
def release_file(request: HttpRequest, study, number: int) -> HttpResponse:
    """One file of the release: a link is issued (after the live check, audited) and the browser sent to it."""
    release_request = catalogue.released_request(number)
    return _issue_and_redirect(
        request, lambda paths: links.release_links(request.user, release_request, paths, via="page"),
        reverse("research-release", args=[study.code, number]))


@require_POST
@study_view(RESEARCHER)
def release_links(request: HttpRequest, study, number: int) -> JsonResponse:
    """A manifest of links: every file of the release (or the posted ``path`` values), as JSON."""
    release_request = catalogue.released_request(number)
    return _links_json(request, lambda paths: links.release_links(request.user, release_request, paths, via="page"))


# --- the read-only review viewer ------------------------------------------------------------------------------


def _viewer_item(number: int, episode_index: int) -> ReleaseItem:
    return catalogue.released_item(number, episode_index)


@study_view(RESEARCHER)
def episode(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    """An episode in the viewer; an old bookmark to an episode of a superseded release leads to the same episode
    in the published release that superseded it."""
    moved = catalogue.successor_item(number, episode_index)
    if moved is not None:
        return redirect("research-episode", study.code, moved.request.number, episode_index)
    item = _viewer_item(number, episode_index)
    indexes = list(catalogue.released_items().filter(request=item.request).values_list("episode_index", flat=True))
    position = indexes.index(episode_index)

    def link(offset: int) -> str | None:
        other = position + offset
        if 0 <= other < len(indexes):
            return reverse("research-episode", args=[study.code, number, indexes[other]])
        return None

    problems = catalogue.unavailable([item])
    return render(request, "research/episode.html", {
        "study": study, "release_request": item.request, "item": item, "recording": item.episode.recording,
        "position": position + 1, "count": len(indexes), "previous_url": link(-1), "next_url": link(1),
        "caption": review.caption(item.episode.recording, headset=False),
        "unavailable": problems,
        "data_url": reverse("research-episode-data", args=[study.code, number, episode_index]),
        "video_url": (reverse("research-episode-video", args=[study.code, number, episode_index])
                      if review.video_path(item) else None),
    })


@study_view(RESEARCHER)
def episode_data(request: HttpRequest, study, number: int, episode_index: int) -> JsonResponse:
    item = _viewer_item(number, episode_index)
    with refusals(request) as outcome:
        links.open_in_viewer(request.user, item, part="data")
        return JsonResponse(review.episode_review(item, released=True))
    return JsonResponse({"detail": str(outcome.error)}, status=outcome.error.status)


@study_view(RESEARCHER)
def episode_video(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    """The released copy of the episode's video, with HTTP Range, after the same live check as a link; a request
    from its first byte (a player starting, or a whole download) is an audit event."""
    item = _viewer_item(number, episode_index)
    name = review.video_path(item)
    path = f"{item.request.prefix}{item.folder}/{name}" if name is not None else None
    try:
        size = storage.releases().size(path) if path is not None else None
    except FileNotFoundError:
        size = None
    # Decided on the bytes this response serves, not on the header's text: any span with the first byte in it.
    span = served_span(request, size) if size is not None else None
    with refusals(request) as outcome:
        links.open_in_viewer(request.user, item, part="video", audited=span is not None and span[0] == 0)
    if outcome.refused:
        return HttpResponse(str(outcome.error), status=outcome.error.status, content_type="text/plain")
    if path is None:
        raise Http404("this episode has no video")
    if size is None:
        raise Http404("this video is no longer stored")
    return ranged_response(request, storage.releases(), path, content_type="video/mp4", size=size)


# --- one-dataset downloads -----------------------------------------------------------------------------------


def _chosen_items(request: HttpRequest, filters: BrowseFilter) -> list[ReleaseItem]:
    if request.POST.get("all_matching") == "1":
        return list(_browse_rows(filters).select_related("request"))
    wanted = set()
    for value in request.POST.getlist("items"):
        number, _, index = value.partition(":")
        wanted.add((integers.parse_int(number, "a release number", low=1),
                    integers.parse_int(index, "an episode index")))
    if not wanted:
        return []
    items = catalogue.released_items().filter(request__number__in={n for n, _ in wanted},
                                              episode_index__in={i for _, i in wanted}).select_related("request")
    items = [item for item in items if (item.request.number, item.episode_index) in wanted]
    missing = sorted(wanted - {(item.request.number, item.episode_index) for item in items})
    if missing:  # refused whole, as the API does: a selection is never built with some of it left out
        raise ResearchError("not episodes of a published release of this study: "
                            + ", ".join(f"release {n} episode {i}" for n, i in missing[:5]))
    return items


@study_view(RESEARCHER)
def dataset_list(request: HttpRequest, study) -> HttpResponse:
    """The one-dataset downloads the researcher asked for; a POST (from the browse page) asks for a new one."""
    if request.method == "POST":
        filters = BrowseFilter(request.GET)
        with refusals(request) as outcome:
            dataset, reused = datasets.request_dataset(request.user, study, _chosen_items(request, filters))
        if not outcome.refused:
            messages.success(request, f"{dataset.dataset_id}: " + (
                "an identical selection was built before; it is reused." if reused else
                f"{dataset.episode_count} episode(s) are being assembled into one dataset."))
            return redirect("research-dataset", study.code, dataset.number)
        return redirect(f"{reverse('research-browse', args=[study.code])}?{request.GET.urlencode()}")
    page = list_page(request, DatasetRequester.objects.filter(user=request.user).select_related("dataset"),
                     DATASET_ORDER)
    return render(request, "research/datasets.html", {"study": study, "page": page})


def _dataset(number: int) -> Dataset:
    dataset = get_object_or_404(Dataset.objects.select_related("study"), number=number)
    return dataset


def _require_requester(request: HttpRequest, dataset: Dataset) -> None:
    if not DatasetRequester.objects.filter(dataset=dataset, user=request.user).exists():
        raise Http404("you have not asked for this dataset")


@never_cache
@study_view(RESEARCHER)
def dataset_page(request: HttpRequest, study, number: int) -> HttpResponse:
    dataset = _dataset(number)
    _require_requester(request, dataset)
    files = list(datasets.dataset_files(dataset)) if dataset.state == Dataset.State.READY else []
    members = list(dataset.episodes.select_related("item__request", "item__episode__recording__demonstrator"))
    return render(request, "research/dataset.html", {
        "study": study, "dataset": dataset, "files": files, "members": members,
        "access_problem": _checked_access(request, study), "portal_url": request.build_absolute_uri("/").rstrip("/"),
        "in_progress": dataset.state in (Dataset.State.QUEUED, Dataset.State.BUILDING),
    })


@study_view(RESEARCHER)
def dataset_status(request: HttpRequest, study, number: int) -> JsonResponse:
    dataset = _dataset(number)
    _require_requester(request, dataset)
    return JsonResponse({"state": dataset.state, "label": dataset.get_state_display(), "phase": dataset.phase,
                         "done": dataset.done, "total": dataset.total, "last_error": dataset.last_error})


@require_POST
@study_view(RESEARCHER)
def dataset_file(request: HttpRequest, study, number: int) -> HttpResponse:
    dataset = _dataset(number)
    _require_requester(request, dataset)
    return _issue_and_redirect(request, lambda paths: links.dataset_links(request.user, dataset, paths, via="page"),
                               reverse("research-dataset", args=[study.code, number]))


@require_POST
@study_view(RESEARCHER)
def dataset_links(request: HttpRequest, study, number: int) -> JsonResponse:
    dataset = _dataset(number)
    _require_requester(request, dataset)
    return _links_json(request, lambda paths: links.dataset_links(request.user, dataset, paths, via="page"))


# --- withdrawals: what they reached, for the study's coordinators and ethics officers ---------------------


WITHDRAWAL_ORDER = ("-created_at", "-pk")


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
