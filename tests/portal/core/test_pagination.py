"""Keyset pagination and the cheap count, on real rows: every row once, in order, both ways; ties in the
ordering column; cursors that do not belong to the list; counts exact below the bound, estimated above it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import RequestFactory
from django.utils import timezone
from django_scopes import scope

from portal.core.pagination import InvalidCursor, Keyset, RowCount, count_rows, keyset_page, list_page
from portal.demo.seeding import seed_study
from portal.recordings.models import Episode, Recording

pytestmark = pytest.mark.django_db
ORDER = ("-created_at", "-pk")


@pytest.fixture
def study():
    return seed_study("pages", episodes=23, headsets=3, demonstrators=4, password="pw-" * 5).study


def _walk(queryset, keyset: Keyset, size: int) -> tuple[list, list]:
    """Every page forwards from the first, then backwards from the last."""
    forwards, cursor = [], None
    while True:
        page = keyset_page(queryset, keyset, cursor, size=size)
        forwards.append([row.pk for row in page.rows])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    backwards, cursor = [], keyset.encode(None, backwards=True)
    while cursor is not None:
        page = keyset_page(queryset, keyset, cursor, size=size)
        backwards.insert(0, [row.pk for row in page.rows])
        cursor = page.previous_cursor
    return forwards, backwards


def test_pages_hold_every_row_once_in_order_both_ways(study):
    with scope(study=study):
        everything = list(Recording.objects.order_by(*ORDER).values_list("pk", flat=True))
        forwards, backwards = _walk(Recording.objects.all(), Keyset(*ORDER), size=5)
    assert len(everything) == 23
    assert [pk for page in forwards for pk in page] == everything
    assert [len(page) for page in forwards] == [5, 5, 5, 5, 3]
    # From the last page back, pages end at the last row, so they are cut from the other end.
    assert [pk for page in backwards for pk in page] == everything
    assert [len(page) for page in backwards] == [3, 5, 5, 5, 5]


def test_rows_sharing_the_ordering_value_are_neither_lost_nor_repeated(study):
    with scope(study=study):
        same = timezone.now() - timedelta(days=400)
        Recording.objects.filter(pk__in=Recording.objects.order_by("pk").values("pk")[:9]).update(created_at=same)
        everything = list(Recording.objects.order_by(*ORDER).values_list("pk", flat=True))
        forwards, backwards = _walk(Recording.objects.all(), Keyset(*ORDER), size=4)
    assert [pk for page in forwards for pk in page] == everything
    assert [pk for page in backwards for pk in page] == everything


def test_a_single_unique_column_and_a_filter(study):
    with scope(study=study):
        episodes = Episode.objects.filter(receipt_status=Episode.Receipt.VERIFIED)
        everything = list(episodes.order_by("-episode_index").values_list("pk", flat=True))
        forwards, _ = _walk(episodes, Keyset("-episode_index"), size=6)
    assert everything and [pk for page in forwards for pk in page] == everything


def test_first_and_last_pages_link_only_where_there_is_somewhere_to_go(study):
    with scope(study=study):
        first = keyset_page(Recording.objects.all(), Keyset(*ORDER), None, size=50)
    assert len(first.rows) == 23
    assert (first.next_cursor, first.previous_cursor, first.last_cursor) == (None, None, None)


@pytest.mark.parametrize("cursor", [
    "not base64 at all!",
    "WyJuIiwiMjAyNi0wMS0wMVQwMDowMDowMCswMDowMCJd",  # ["n","2026-01-01T00:00:00+00:00"]: one value, two columns
    "WyJuIixbImxhdGVyIiwzXV0",  # ["n",["later",3]]: not a time
    "WyJ4IixbIjIwMjYtMDEtMDFUMDA6MDA6MDArMDA6MDAiLDNdXQ",  # direction "x"
    "WyJuIixudWxsXQ",  # ["n",null]: only the last page has no position
    "e30",  # {}
])
def test_a_cursor_that_is_no_position_in_the_list_is_refused(study, cursor):
    with scope(study=study), pytest.raises(InvalidCursor, match="does not point into this list"):
        keyset_page(Recording.objects.all(), Keyset(*ORDER), cursor)


def test_a_keyset_is_one_direction():
    with pytest.raises(ValueError, match="one direction"):
        Keyset("-created_at", "pk")


def test_a_page_with_a_bad_cursor_shows_the_first_page_and_says_why(study):
    request = RequestFactory().get("/list/", {"state": "verified", "cursor": "garbage"})
    with scope(study=study):
        page = list_page(request, Recording.objects.filter(state="verified"), ORDER, size=5)
    assert "start again from the first page" in page.error
    assert page.previous_url is None and page.next_url.startswith("?state=verified&cursor=")


def test_links_keep_the_filters(study):
    request = RequestFactory().get("/list/", {"state": "verified", "headset": "HS-0001"})
    with scope(study=study):
        page = list_page(request, Recording.objects.all(), ORDER, size=5)
        following = list_page(RequestFactory().get("/list/" + page.next_url), Recording.objects.all(), ORDER, size=5)
    assert "state=verified" in page.next_url and "headset=HS-0001" in page.next_url
    assert following.first_url == "?state=verified&headset=HS-0001"
    assert str(page.count) == "23" and page.showing == "Showing 5 of 23"


def test_count_is_exact_up_to_the_bound(study):
    with scope(study=study):
        assert count_rows(Recording.objects.all(), exact_up_to=23) == RowCount(23, exact=True)
        above = count_rows(Recording.objects.all(), exact_up_to=10)
    assert not above.exact and above.value >= 11
    if connection.vendor != "postgresql":
        assert above.value == 11  # no planner to ask: "about 11", never fewer than were counted


def test_a_count_in_the_lists_order_counts_the_same(study):
    request = RequestFactory().get("/list/")
    with scope(study=study):
        ordered = Recording.objects.order_by(*ORDER)
        assert count_rows(ordered, exact_up_to=23, in_order=True) == RowCount(23, exact=True)
        assert count_rows(ordered.filter(pk=ordered.last().pk), exact_up_to=23, in_order=True) == \
            RowCount(1, exact=True)
        above = count_rows(ordered, exact_up_to=10, in_order=True)
        page = list_page(request, Recording.objects.all(), ORDER, size=5, count_in_order=True)
    assert not above.exact and above.value >= 11
    assert page.showing == "Showing 5 of 23"


@pytest.mark.postgres
def test_above_the_bound_the_count_is_the_planners_estimate(study):
    if connection.vendor != "postgresql":
        pytest.skip("the estimate comes from PostgreSQL's planner")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE recordings_recording")
    with scope(study=study):
        estimate = count_rows(Recording.objects.all(), exact_up_to=10)
    assert not estimate.exact and 15 <= estimate.value <= 40  # the planner's idea of 23 rows


def test_estimates_are_shown_rounded_and_marked():
    assert str(RowCount(98_431, exact=False)) == "about 98,000"
    assert str(RowCount(1_000_493, exact=False)) == "about 1,000,000"
    assert str(RowCount(98_431, exact=True)) == "98,431"


def test_rows_read_as_named_values_walk_the_list_as_instances_do(study):
    request = RequestFactory().get("/list/")
    with scope(study=study):
        everything = list(Recording.objects.order_by(*ORDER).values_list("pk", "uid"))
        rows, cursor = [], None
        while True:
            page = keyset_page(Recording.objects.all(), Keyset(*ORDER), cursor, size=7,
                               columns=("pk", "uid", "created_at"))
            rows += page.rows
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        listed = list_page(request, Recording.objects.all(), ORDER, size=5, columns=("pk", "uid", "created_at"))
    assert [(row.pk, row.uid) for row in rows] == everything
    assert not isinstance(rows[0], Recording) and listed.showing == "Showing 5 of 23"


def test_rows_read_as_values_need_the_keysets_columns(study):
    with scope(study=study), pytest.raises(ValueError, match="keyset's created_at"):
        keyset_page(Recording.objects.all(), Keyset(*ORDER), None, columns=("pk", "uid"))
