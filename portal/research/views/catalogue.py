"""Released episodes (``services.catalogue``): browsing them, a published release (a superseded one says by which
release), and an episode in the viewer shared with the releases' review (``releases/viewer.py``), its data and
video read from the released copy after the same live check as a link."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from exporter.layout import episode_folder
from exporter.release import MANIFEST, SIGNATURE
from portal.access.models import Role
from portal.access.permissions import study_view
from portal.core import display
from portal.core.pagination import list_page
from portal.core.signing import key_fingerprint
from portal.releases.models import ReleaseRequest
from portal.releases.services import cards as release_cards
from portal.releases.viewer import Viewer
from portal.research import notices
from portal.research.forms import BrowseFilter
from portal.research.services import access, catalogue, client, links

RESEARCHER = Role.RESEARCHER
# Released episodes are listed by the index of ReleaseItem's unique pair (request, episode_index).
ITEM_ORDER = ("-request_id", "-episode_index")

# The published release's copy, as researchers see it: each read of the data or video is checked live (grant,
# agreement, release still published, consent) and audited (``links.open_in_viewer``); no headset named.
RELEASED = Viewer(route="research-episode", template="research/episode.html", headset=False, released=True,
                  items=lambda release: catalogue.released_items().filter(request=release),
                  check=links.open_in_viewer)


def browse_rows(filters: BrowseFilter, released=None):
    """The released episodes the filters choose, with what the browse page shows of each; ``released``: those of
    ``catalogue.released_items()`` already read in this request, if any."""
    return filters.apply((catalogue.released_items() if released is None else released).select_related(
        "request", "episode__recording__demonstrator").only(
        "episode_index", "study_id", "request__number", "request__study_id", "episode__length",
        "episode__recording__recorded_at", "episode__recording__capture_id",
        "episode__recording__demonstrator__designator"))


# One row of the browse table (the text the template's loop printed for it, escaped as it escaped).
BROWSE_ROW = """
      <tr data-episode="{index}">
        <td><input type="checkbox" name="items" value="{number}:{index}" id="item-{number}-{index}"></td>
        <td class="ident"><a href="{url}{number}/">release-{release}</a></td>
        <td class="ident"><label for="item-{number}-{index}">{folder}</label></td>
        <td class="ident long">{capture}</td>
        <td class="ident">{recorded}</td>
        <td class="ident long">{demonstrator}</td>
        <td>{length}</td>
        <td><a href="{url}{number}/episodes/{index}/">view</a></td>
      </tr>
      """
BROWSE_COLUMNS = ("request_id", "episode_index", "request__number", "episode__length",
                  "episode__recording__recorded_at", "episode__recording__capture_id",
                  "episode__recording__demonstrator__designator")


def browse_html(rows, released_url: str) -> list[str]:
    """The browse page's rows as HTML, made once per row in Python (``core.display``) from named rows of
    ``BROWSE_COLUMNS``: a release's page is ``released_url`` plus its number, an episode's that plus
    ``episodes/<index>/`` (urls.py)."""
    return [display.row_html(
        BROWSE_ROW, index=str(row.episode_index), number=str(row.request__number), url=released_url,
        release=f"{row.request__number:04d}", folder=episode_folder(row.episode_index),
        capture=row.episode__recording__capture_id,
        recorded=display.minute(row.episode__recording__recorded_at, ""),
        demonstrator=row.episode__recording__demonstrator__designator or "\N{EM DASH}",
        length=str(row.episode__length),
    ) for row in rows]


@study_view(RESEARCHER)
def browse(request: HttpRequest, study) -> HttpResponse:
    filters = BrowseFilter(request.GET)
    page = list_page(request, browse_rows(filters, filters.released), ITEM_ORDER, columns=BROWSE_COLUMNS)
    return render(request, "research/browse.html", {
        "study": study, "filters": filters, "page": page,
        "rows": browse_html(page.rows, reverse("research-browse", args=[study.code])),
        "access_problem": access.access_problem(request.user, study),
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
            "told": notices.withdrawal_messages(request.user, superseded)})
    release_request = catalogue.released_request(number)
    items = list(catalogue.released_items().filter(request=release_request).select_related(
        "episode__recording__demonstrator"))
    return render(request, "research/release.html", {
        "study": study, "release_request": release_request, "release": release_request.release, "items": items,
        "access_problem": access.access_problem(request.user, study),
        **client.commands(request),
        "public_key_fingerprint": key_fingerprint(),
        "manifest_names": [MANIFEST, SIGNATURE, *sorted(release_request.release.card_files or {})],
        "link_seconds": settings.CERES_DOWNLOAD_LINK_SECONDS,
        "successor": ReleaseRequest.objects.filter(supersedes=release_request).first() if superseded else None,
        "told": notices.withdrawal_messages(request.user, release_request) if superseded else (),
        "jsonld": release_cards.release_jsonld(release_request),
    })


# --- the read-only review viewer ------------------------------------------------------------------------------


@study_view(RESEARCHER)
def episode(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    """An episode in the viewer; an old bookmark to an episode of a superseded release leads to the same episode
    in the published release that superseded it."""
    moved = catalogue.successor_item(number, episode_index)
    if moved is not None:
        return redirect("research-episode", study.code, moved.request.number, episode_index)
    item = catalogue.released_item(number, episode_index)
    return RELEASED.page(request, study, item, unavailable=catalogue.unavailable([item]))


@study_view(RESEARCHER)
def episode_data(request: HttpRequest, study, number: int, episode_index: int) -> JsonResponse:
    return RELEASED.data(request, catalogue.released_item(number, episode_index))


@study_view(RESEARCHER)
def episode_video(request: HttpRequest, study, number: int, episode_index: int) -> HttpResponse:
    """The released copy of the episode's video, with HTTP Range, after the same live check as a link; a request
    from its first byte (a player starting, or a whole download) is an audit event."""
    return RELEASED.video(request, catalogue.released_item(number, episode_index))
