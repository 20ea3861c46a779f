"""Long lists, pages and API alike: keyset (cursor) pagination and a cheap "showing N of M" count.

A page is found from the position of the row next to it, not by counting rows from the start, so page 1000
costs what page 1 costs: ``WHERE (created_at, id) < (…) ORDER BY created_at DESC, id DESC LIMIT 51``, a range
scan of an index on those columns. The cursor in the URL is that position, encoded; a cursor that does not
decode to values of the list's columns is refused with ``InvalidCursor`` (no query runs).

Used by: ``list_page`` (a page's rows, count and links, filters kept in the URL) and ``KeysetPagination``
(the API's paginator). See docs/architecture.md, "Lists".
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import connections
from django.db.models import F, Model, QuerySet, Value
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan
from django.http import HttpRequest, QueryDict
from rest_framework import exceptions
from rest_framework.pagination import BasePagination
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from portal.core.errors import ServiceError

PAGE_SIZE = 50
# Below this many rows a list is counted exactly; above it the count is the planner's estimate.
EXACT_COUNT_UP_TO = 10_000


class InvalidCursor(ServiceError):
    """A page position that does not belong to this list (edited, truncated or from another list)."""


class Keyset:
    """The order of a list: indexed columns ending in a unique one, all ascending or all descending.

    ``Keyset("-created_at", "-pk")`` pages newest first; ``Keyset("episode_index")`` needs nothing more
    because the column is unique within the study scope.
    """

    def __init__(self, *ordering: str):
        if not ordering or len({name.startswith("-") for name in ordering}) != 1:
            raise ValueError(f"a keyset orders by one or more columns, all in one direction: {ordering!r}")
        self.names = tuple(name.lstrip("-") for name in ordering)
        self.descending = ordering[0].startswith("-")

    def order_by(self, *, backwards: bool = False) -> list[str]:
        flip = self.descending != backwards
        return [("-" if flip else "") + name for name in self.names]

    def position(self, row: Model) -> list[Any]:
        return [getattr(row, name) for name in self.names]

    def encode(self, row: Model | None, *, backwards: bool) -> str:
        """The cursor of the page after ``row`` (before it when ``backwards``); ``None``: the last page."""
        position = None if row is None else self.position(row)
        raw = json.dumps(["p" if backwards else "n", position], default=_exact, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def decode(self, model: type[Model], cursor: str) -> tuple[bool, list[Any] | None]:
        """(backwards, position) from a cursor, each value checked against its column."""
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            direction, position = json.loads(raw)
            backwards = {"n": False, "p": True}[direction]
            if position is None:
                if not backwards:
                    raise ValueError("only the last page has no position")
                return True, None
            if not isinstance(position, list) or len(position) != len(self.names):
                raise ValueError("wrong number of values")
            return backwards, [self._column(model, name).to_python(value)
                               for name, value in zip(self.names, position, strict=True)]
        except (ValueError, TypeError, KeyError, binascii.Error, UnicodeDecodeError, ValidationError):
            raise InvalidCursor("this page link does not point into this list (it was changed or cut short); "
                                "start again from the first page") from None

    @staticmethod
    def _column(model: type[Model], name: str):
        try:
            return model._meta.pk if name == "pk" else model._meta.get_field(name)
        except FieldDoesNotExist:
            raise ValueError(name) from None

    def beyond(self, queryset: QuerySet, position: list[Any], *, backwards: bool) -> QuerySet:
        """Rows after ``position`` in the list's order (before it when ``backwards``)."""
        smaller = self.descending != backwards
        if len(self.names) == 1:
            return queryset.filter(**{f"{self.names[0]}__{'lt' if smaller else 'gt'}": position[0]})
        lookup = TupleLessThan if smaller else TupleGreaterThan
        return queryset.filter(lookup(Tuple(*(F(name) for name in self.names)), tuple(position)))


def _exact(value: Any) -> str:
    """Cursor values as text that reads back to the same value (JSON encoders of Django cut microseconds)."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, UUID | Decimal):
        return str(value)
    raise TypeError(f"a keyset column of type {type(value).__name__} cannot be put into a cursor")


@dataclass(frozen=True)
class KeysetPage:
    rows: list[Any]
    next_cursor: str | None
    previous_cursor: str | None
    # The first page has no previous; the last page cursor is offered whenever there is a next one.
    last_cursor: str | None


def keyset_page(queryset: QuerySet, keyset: Keyset, cursor: str | None, *, size: int = PAGE_SIZE,
                columns: Sequence[str] = ()) -> KeysetPage:
    """One page of ``queryset`` in ``keyset`` order: ``size + 1`` rows read, so the query is the same on
    every page. ``InvalidCursor`` for a cursor that is not a position in this list. ``columns``: the rows are
    named rows of these values (``values_list(*columns, named=True)``, the keyset's columns among them), not
    model instances."""
    missing = set(keyset.names) - set(columns)
    if columns and missing:
        raise ValueError(f"the rows' columns need the keyset's {', '.join(sorted(missing))}")
    backwards, position = keyset.decode(queryset.model, cursor) if cursor else (False, None)
    rows_query = queryset.order_by(*keyset.order_by(backwards=backwards))
    if position is not None:
        rows_query = keyset.beyond(rows_query, position, backwards=backwards)
    if columns:
        rows_query = rows_query.values_list(*columns, named=True)
    rows = list(rows_query[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    if backwards:
        rows.reverse()
        has_next, has_previous = position is not None, more
    else:
        has_next, has_previous = more, position is not None
    return KeysetPage(
        rows=rows,
        next_cursor=keyset.encode(rows[-1], backwards=False) if has_next and rows else None,
        previous_cursor=keyset.encode(rows[0], backwards=True) if has_previous and rows else None,
        last_cursor=keyset.encode(None, backwards=True) if has_next else None,
    )


# --- counts -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowCount:
    """How many rows a list holds: exact, or (above the threshold) the database planner's estimate."""

    value: int
    exact: bool

    def __str__(self) -> str:
        if self.exact:
            return f"{self.value:,}"
        return f"about {_round(self.value):,}"


def _round(value: int) -> int:
    """Two significant digits: an estimate should not look more precise than it is."""
    digits = len(str(value)) - 2
    return round(value, -digits) if digits > 0 else value


def count_rows(queryset: QuerySet, *, exact_up_to: int = EXACT_COUNT_UP_TO, in_order: bool = False) -> RowCount:
    """Count exactly while there are at most ``exact_up_to`` rows (one query reading no more than that);
    above it, the planner's estimate of the same query on PostgreSQL (never below the exact bound).

    ``in_order``: the bounded count reads the rows in the list's order, the first ``exact_up_to`` of the range the
    pages read (the audit log's: its newest entries of one index, in memory already), instead of whatever the
    planner picks for an unordered count: for a filter holding most of a large table a sequential scan, which
    PostgreSQL reads through a small ring of buffers, from the operating system's cache or the disk every time."""
    connection = connections[queryset.db]
    ordered = queryset if in_order else queryset.order_by()
    if connection.vendor == "postgresql":
        # No column at all (PostgreSQL's "SELECT FROM ... LIMIT n"): any index that serves the filter answers
        # on its own, an index-only scan.
        rows = ordered.annotate(counted=Value(1)).values("counted")
    else:
        rows = ordered.values("pk")
    counted = rows[: exact_up_to + 1].count()
    if counted <= exact_up_to:
        return RowCount(counted, exact=True)
    if connection.vendor != "postgresql":
        return RowCount(counted, exact=False)
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return RowCount(max(int(plan[0]["Plan"]["Plan Rows"]), counted), exact=False)


# --- pages --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListPage:
    """What a list template shows: the rows, "showing N of M", and links that keep the filters."""

    rows: list[Any]
    count: RowCount
    first_url: str | None
    previous_url: str | None
    next_url: str | None
    last_url: str | None
    error: str = ""

    @property
    def showing(self) -> str:
        return f"Showing {len(self.rows):,} of {self.count}"

    @property
    def paged(self) -> bool:
        return bool(self.previous_url or self.next_url)


def _url(request: HttpRequest, cursor: str | None) -> str:
    query: QueryDict = request.GET.copy()
    query.pop("cursor", None)
    if cursor:
        query["cursor"] = cursor
    return f"?{query.urlencode()}" if query else request.path


def list_page(request: HttpRequest, queryset: QuerySet, ordering: Sequence[str], *, size: int = PAGE_SIZE,
              count_in_order: bool = False, columns: Sequence[str] = ()) -> ListPage:
    """A page of a list view from ``?cursor=``; the other query parameters (filters) stay in every link.

    A cursor that does not belong to the list shows the first page with the reason (``error``).
    ``count_in_order``: count in the list's order (``count_rows``' ``in_order``). ``columns``: the rows are named
    rows of these values, not model instances (``keyset_page``); the count reads ``queryset`` itself (the joins
    of related columns are the rows' alone).
    """
    keyset = Keyset(*ordering)
    cursor, error = request.GET.get("cursor") or None, ""
    try:
        page = keyset_page(queryset, keyset, cursor, size=size, columns=columns)
    except InvalidCursor as exc:
        cursor, error = None, str(exc)
        page = keyset_page(queryset, keyset, None, size=size, columns=columns)
    return ListPage(
        rows=page.rows,
        count=count_rows(queryset.order_by(*keyset.order_by()) if count_in_order else queryset,
                         in_order=count_in_order),
        first_url=_url(request, None) if page.previous_cursor else None,
        previous_url=_url(request, page.previous_cursor) if page.previous_cursor else None,
        next_url=_url(request, page.next_cursor) if page.next_cursor else None,
        last_url=_url(request, page.last_cursor) if page.last_cursor else None,
        error=error,
    )


# --- the API ------------------------------------------------------------------------------------------------


class KeysetPagination(BasePagination):
    """The API's paginator: ``?cursor=`` as on the pages, ``next``/``previous`` links, and ``count`` with
    ``count_exact`` (false when the count is an estimate). The view names its order in ``keyset``."""

    cursor_query_param = "cursor"

    def paginate_queryset(self, queryset: QuerySet, request, view=None) -> list[Any]:
        keyset = Keyset(*view.keyset)
        self.request = request
        try:
            self.page = keyset_page(queryset, keyset, request.query_params.get(self.cursor_query_param),
                                    size=settings.REST_FRAMEWORK.get("PAGE_SIZE") or PAGE_SIZE)
        except InvalidCursor as exc:
            raise exceptions.ValidationError({self.cursor_query_param: str(exc)}) from None
        self.count = count_rows(queryset)
        return self.page.rows

    def _link(self, cursor: str | None) -> str | None:
        if cursor is None:
            return None
        return replace_query_param(self.request.build_absolute_uri(), self.cursor_query_param, cursor)

    def get_paginated_response(self, data) -> Response:
        return Response({"count": self.count.value, "count_exact": self.count.exact,
                         "next": self._link(self.page.next_cursor),
                         "previous": self._link(self.page.previous_cursor), "results": data})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        link = {"type": "string", "nullable": True, "format": "uri"}
        return {"type": "object", "required": ["count", "count_exact", "results"], "properties": {
            "count": {"type": "integer", "description": "rows in the list; an estimate when count_exact is false"},
            "count_exact": {"type": "boolean"},
            "next": link, "previous": link, "results": schema}}

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return [{"name": self.cursor_query_param, "required": False, "in": "query",
                 "description": "The page position from a next or previous link.", "schema": {"type": "string"}}]
