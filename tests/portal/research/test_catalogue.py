"""The catalogue of released episodes (services/catalogue.py): a release's files list every object it stored."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from portal.core import storage
from portal.research.services import catalogue

pytestmark = pytest.mark.django_db


def test_catalogue_release_files_lists_every_object(released):
    with scope(study=released.study):
        files = catalogue.release_files(released)
    assert sorted(name for name, _ in files.values()) == storage.walk(storages["releases"], released.prefix)


def test_the_browse_pages_rows_are_those_of_the_orms_scoped_query(released):
    """The browse page reads its rows as named values (``BROWSE_COLUMNS``); each row's HTML is what the ORM's
    instances of the same scoped query give, escaped as the template escaped them, with no demonstrator as a dash."""
    from django.test import RequestFactory
    from django.utils.html import format_html

    from portal.core import display
    from portal.core.pagination import list_page
    from portal.recordings.models import Recording
    from portal.research.forms import BrowseFilter
    from portal.research.views.catalogue import BROWSE_COLUMNS, BROWSE_ROW, ITEM_ORDER, browse_html, browse_rows

    with scope(study=released.study):
        first, second = (item.episode.recording_id for item in released.items.order_by("episode_index")[:2])
        Recording.objects.filter(pk=first).update(demonstrator=None)
        Recording.objects.filter(pk=second).update(capture_id='<cap & "ture">')
        request = RequestFactory().get("/")
        filters = BrowseFilter(request.GET)
        page = list_page(request, browse_rows(filters, filters.released), ITEM_ORDER, columns=BROWSE_COLUMNS)
        html = browse_html(page.rows, "/released/")
        items = list(browse_rows(BrowseFilter({})).order_by("-request_id", "-episode_index"))
    expected = [format_html(
        BROWSE_ROW, index=item.episode_index, number=item.request.number, url="/released/",
        release=f"{item.request.number:04d}", folder=item.folder, capture=item.episode.recording.capture_id,
        recorded=display.minute(item.episode.recording.recorded_at, ""),
        demonstrator=str(item.episode.recording.demonstrator) if item.episode.recording.demonstrator else "—",
        length=item.episode.length) for item in items]
    assert len(expected) == 3 and html == expected
    assert sum("<td class=\"ident long\">—</td>" in row for row in html) == 1
    assert sum("&lt;cap &amp; &quot;ture&quot;&gt;" in row for row in html) == 1
