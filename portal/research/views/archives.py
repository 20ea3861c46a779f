"""A whole published release or ready one-dataset download as one ZIP (``services.archives``): the page's button
posts (with its CSRF token, like the buttons that issue links); the live check and the audit event come before
the first byte, then the ZIP streams with its length known. A refusal is a page saying why, not a ZIP."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.research.exceptions import ResearchError
from portal.research.services import archives, catalogue
from portal.research.views.datasets import requested_dataset

RESEARCHER = Role.RESEARCHER


def _send(request: HttpRequest, make: Callable[[], archives.Archive], *, what: str, back: str) -> HttpResponse:
    try:
        archive = make()
    except ResearchError as refused:
        return render(request, "research/archive_refused.html", {"error": refused, "what": what, "back": back},
                      status=refused.status)
    response = StreamingHttpResponse(archive.chunks(), content_type="application/zip")
    response["Content-Length"] = str(archive.size)
    response["Content-Disposition"] = f'attachment; filename="{archive.filename}"'
    return response


@never_cache
@require_POST
@study_view(RESEARCHER)
def release_zip(request: HttpRequest, study, number: int) -> HttpResponse:
    """Every file of the release, manifest and signature included, as one stored ZIP."""
    release_request = catalogue.released_request(number)
    return _send(request, lambda: archives.release_archive(request.user, release_request),
                 what=release_request.release_id,
                 back=reverse("research-release", args=[study.code, number]))


@never_cache
@require_POST
@study_view(RESEARCHER)
def dataset_zip(request: HttpRequest, study, number: int) -> HttpResponse:
    """Every file of the researcher's ready dataset, manifest and signature included, as one stored ZIP."""
    dataset = requested_dataset(request, number)
    return _send(request, lambda: archives.dataset_archive(request.user, dataset),
                 what=dataset.dataset_id, back=reverse("research-dataset", args=[study.code, number]))
