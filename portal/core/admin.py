from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.db import connections
from django.utils.functional import cached_property

from portal.core.pagination import count_rows


class ReadOnlyAdmin(admin.ModelAdmin):
    """Admin pages that only show: every change goes through the pages, the API and the services."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class EstimatingPaginator(Paginator):
    """Counts like the portal's lists (exact up to a bound, the planner's estimate above it). A page number
    past an estimated end shows an empty page instead of an error."""

    @cached_property
    def count(self) -> int:
        return count_rows(self.object_list).value

    def validate_number(self, number) -> int:
        try:
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger("That page number is not an integer") from None
        if number < 1:
            raise EmptyPage("That page number is less than 1")
        return number


class _BigTableChangeList(ChangeList):
    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer(*self.model_admin.list_defer) if self.model_admin.list_defer else queryset


class BigTableAdmin(ReadOnlyAdmin):
    """The admin of a table with hundreds of thousands of rows: a cheap count, no count of the whole table
    beside it, no facet counts, sorting only by indexed columns (``sortable_by``), and the columns a row does
    not show (``list_defer``: JSON blobs) left unread. Name the relations a row shows in
    ``list_select_related`` so no row costs a query of its own."""

    paginator = EstimatingPaginator
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_defer: tuple[str, ...] = ()

    def get_changelist(self, request, **kwargs):
        return _BigTableChangeList


class DistinctValuesFilter(admin.AllValuesFieldListFilter):
    """A filter offering every value of a column, found on PostgreSQL by skipping through the column's index
    (one index probe per distinct value) instead of reading every row. Needs an index led by the column."""

    def __init__(self, field, request, params, model, model_admin, field_path):
        super().__init__(field, request, params, model, model_admin, field_path)
        connection = connections[model_admin.get_queryset(request).db]
        if connection.vendor == "postgresql" and field_path == field.name:
            self.lookup_choices = _distinct_values(connection, model._meta.db_table, field.column)


def _distinct_values(connection, table: str, column: str) -> list:
    quote = connection.ops.quote_name
    table, column = quote(table), quote(column)
    # Names from the model's own meta, quoted; no value from the request reaches this text.
    sql = (
        f"WITH RECURSIVE found(value) AS ("  # noqa: S608
        f" (SELECT {column} FROM {table} WHERE {column} IS NOT NULL ORDER BY {column} LIMIT 1)"
        f" UNION ALL"
        f" SELECT (SELECT {column} FROM {table} WHERE {column} > found.value ORDER BY {column} LIMIT 1)"
        f" FROM found WHERE found.value IS NOT NULL"
        f") SELECT value FROM found WHERE value IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [row[0] for row in cursor.fetchall()]
