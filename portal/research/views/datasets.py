"""One-dataset downloads (``services.datasets``): asking for one from the browse page's selection, the list of
those asked for, and a dataset's page and build status (its files are given out in ``views/links.py``)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core import integers
from portal.core.errors import refusals
from portal.core.pagination import list_page
from portal.releases.models import ReleaseItem
from portal.research.exceptions import ResearchError
from portal.research.forms import BrowseFilter
from portal.research.models import Dataset, DatasetRequester
from portal.research.services import access, catalogue, client, datasets
from portal.research.views.catalogue import browse_rows

RESEARCHER = Role.RESEARCHER
# Datasets are listed by the index (user, -requested_at, -id) of who asked for them.
DATASET_ORDER = ("-requested_at", "-pk")


def _chosen_items(request: HttpRequest, filters: BrowseFilter) -> list[ReleaseItem]:
    if request.POST.get("all_matching") == "1":
        return list(browse_rows(filters).select_related("request"))
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


def requested_dataset(request: HttpRequest, number: int) -> Dataset:
    """The study's dataset ``number``, if the signed-in researcher asked for it (404 for anyone else)."""
    dataset = get_object_or_404(Dataset.objects.select_related("study"), number=number)
    if not DatasetRequester.objects.filter(dataset=dataset, user=request.user).exists():
        raise Http404("you have not asked for this dataset")
    return dataset


@never_cache
@study_view(RESEARCHER)
def dataset_page(request: HttpRequest, study, number: int) -> HttpResponse:
    dataset = requested_dataset(request, number)
    files = list(datasets.dataset_files(dataset)) if dataset.state == Dataset.State.READY else []
    members = list(dataset.episodes.select_related("item__request", "item__episode__recording__demonstrator"))
    return render(request, "research/dataset.html", {
        "study": study, "dataset": dataset, "files": files, "members": members,
        "access_problem": access.access_problem(request.user, study),
        **client.commands(request),
        "in_progress": dataset.state in (Dataset.State.QUEUED, Dataset.State.BUILDING),
    })


@study_view(RESEARCHER)
def dataset_status(request: HttpRequest, study, number: int) -> JsonResponse:
    dataset = requested_dataset(request, number)
    return JsonResponse({"state": dataset.state, "label": dataset.get_state_display(), "phase": dataset.phase,
                         "done": dataset.done, "total": dataset.total, "last_error": dataset.last_error})
