"""Signed download links (``services.links``): a file of a published release or of a one-dataset download (the
browser sent to its link) or a manifest of links as JSON, the download itself (no sign-in: the token is the
right), and the links issued, to a researcher or in a study."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_scopes import scopes_disabled

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core import storage
from portal.core.errors import refusals
from portal.core.http import ranged_response, served_span
from portal.core.pagination import list_page
from portal.research.exceptions import LinkRefused
from portal.research.models import IssuedLink
from portal.research.services import catalogue, links
from portal.research.views.datasets import requested_dataset

COORDINATOR, ETHICS, RESEARCHER = Role.COORDINATOR, Role.ETHICS_OFFICER, Role.RESEARCHER
# Links are listed by the index (study | user, -issued_at, -id).
LINK_ORDER = ("-issued_at", "-pk")


def _absolute(request: HttpRequest, link: links.Link) -> dict:
    url = link.url if "://" in link.url else request.build_absolute_uri(link.url)
    return {"path": link.path, "url": url, "expires_at": link.expires_at.isoformat()}


@login_required
def my_links(request: HttpRequest) -> HttpResponse:
    with scopes_disabled():
        page = list_page(request, IssuedLink.objects.filter(user=request.user).select_related(
            "study", "release", "dataset").defer("dataset__manifest", "dataset__signature"), LINK_ORDER)
    return render(request, "research/links.html", {"page": page, "study": None})


@study_view(COORDINATOR, ETHICS)
def study_links(request: HttpRequest, study) -> HttpResponse:
    rows = IssuedLink.objects.select_related("user", "study", "release", "dataset").defer(
        "dataset__manifest", "dataset__signature")
    who = request.GET.get("researcher", "").strip()
    if who:
        rows = rows.filter(user__username=who)
    page = list_page(request, rows, LINK_ORDER)
    return render(request, "research/links.html", {"page": page, "study": study, "researcher": who})


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


# --- a published release's files ------------------------------------------------------------------------------


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


# --- a one-dataset download's files ---------------------------------------------------------------------------


@require_POST
@study_view(RESEARCHER)
def dataset_file(request: HttpRequest, study, number: int) -> HttpResponse:
    dataset = requested_dataset(request, number)
    return _issue_and_redirect(request, lambda paths: links.dataset_links(request.user, dataset, paths, via="page"),
                               reverse("research-dataset", args=[study.code, number]))


@require_POST
@study_view(RESEARCHER)
def dataset_links(request: HttpRequest, study, number: int) -> JsonResponse:
    dataset = requested_dataset(request, number)
    return _links_json(request, lambda paths: links.dataset_links(request.user, dataset, paths, via="page"))
