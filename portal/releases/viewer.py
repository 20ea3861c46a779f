"""The episode viewer, one for two rooms: the review of a release request by its coordinators and ethics officers
(``releases/views.py``: the stored shard) and a published release's episode for its researchers
(``research/views/catalogue.py``: the released copy, after the live check of each read). Each room names what
differs in a ``Viewer`` and serves the three parts through it: the page (``templates/<room>/episode.html``, which
includes ``releases/_viewer.html`` with ``releases/viewer.js``), the episode's data as JSON, and its video with
HTTP Range (browsers seek with it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from portal.core import storage
from portal.core.errors import refusals
from portal.core.http import ranged_response, served_span
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.releases.services import review


@dataclass(frozen=True)
class Viewer:
    """What a room's viewer shows and how it reads: ``route`` names the page's URL (``<route>-data`` and
    ``<route>-video`` its parts), ``items`` the request's episodes it steps through, ``headset`` whether the caption
    names the headset (the study's own staff only), ``released`` whether it reads the published release's copy
    (the ``releases`` storage) rather than the stored shard, and ``check(user, item, part=, audited=)`` the check
    each read of the data or video passes first (none for the review)."""

    route: str
    template: str
    items: Callable[[ReleaseRequest], QuerySet[ReleaseItem]]
    headset: bool
    released: bool
    check: Callable[..., None] | None = None

    def _url(self, part: str, study, number: int, episode_index: int) -> str:
        return reverse(f"{self.route}{part}", args=[study.code, number, episode_index])

    def page(self, request: HttpRequest, study, item: ReleaseItem, **context) -> HttpResponse:
        """The episode in the viewer, with links to the previous and next episode of its request; ``context``: what
        the room's page shows besides."""
        number, episode_index = item.request.number, item.episode_index
        indexes = list(self.items(item.request).values_list("episode_index", flat=True))
        position = indexes.index(episode_index)

        def link(offset: int) -> str | None:
            other = position + offset
            return self._url("", study, number, indexes[other]) if 0 <= other < len(indexes) else None

        return render(request, self.template, {
            "study": study, "release_request": item.request, "item": item, "recording": item.episode.recording,
            "position": position + 1, "count": len(indexes), "previous_url": link(-1), "next_url": link(1),
            "caption": review.caption(item.episode.recording, headset=self.headset),
            "data_url": self._url("-data", study, number, episode_index),
            "video_url": self._url("-video", study, number, episode_index) if review.video_path(item) else None,
            **context,
        })

    def data(self, request: HttpRequest, item: ReleaseItem) -> JsonResponse:
        """Series, segments, gaps and removed retries of the episode (``review.episode_review``)."""
        with refusals(request) as outcome:
            if self.check is not None:
                self.check(request.user, item, part="data")
            return JsonResponse(review.episode_review(item, released=self.released))
        return JsonResponse({"detail": str(outcome.error)}, status=outcome.error.status)

    def video(self, request: HttpRequest, item: ReleaseItem) -> HttpResponse:
        """The episode's video, with HTTP Range; where reads are checked, a request from its first byte (a player
        starting, or a whole download) is the audited one."""
        name = review.video_path(item)
        store = storage.releases() if self.released else storage.shards()
        if name is None:
            path = None
        elif self.released:
            path = f"{item.request.prefix}{item.folder}/{name}"
        else:
            path = item.episode.prefix + name
        try:
            size = store.size(path) if path is not None else None
        except FileNotFoundError:
            size = None
        if self.check is not None:
            # Decided on the bytes this response serves, not on the header's text: any span with the first byte in it.
            span = served_span(request, size) if size is not None else None
            with refusals(request) as outcome:
                self.check(request.user, item, part="video", audited=span is not None and span[0] == 0)
            if outcome.refused:
                return HttpResponse(str(outcome.error), status=outcome.error.status, content_type="text/plain")
        if path is None:
            raise Http404("this episode has no video")
        if size is None:
            raise Http404("this video is no longer stored")
        return ranged_response(request, store, path, content_type="video/mp4", size=size)
