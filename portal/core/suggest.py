"""Suggestion endpoints for typed filters: instead of a menu of every headset or demonstrator of a study, a
filter is a text field whose ``<datalist>`` is filled (``static/suggest.js``) with a few values matching what
was typed. A list adds one with ``suggestion_response`` in a view and a URL; see docs/architecture.md, "Lists"."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse

SUGGESTIONS = 10
LONGEST_TERM = 100


def suggestions(queryset: QuerySet, field: str, term: str, *, limit: int = SUGGESTIONS) -> list[str]:
    """Up to ``limit`` values of ``field`` containing ``term`` (any case), in order; the first ones when blank."""
    if term:
        queryset = queryset.filter(**{f"{field}__icontains": term})
    return list(queryset.order_by(field).values_list(field, flat=True)[:limit])


def suggestion_response(request: HttpRequest, queryset: QuerySet, field: str) -> JsonResponse:
    """The answer of a suggestion endpoint to ``?q=…``: ``{"results": [...]}``. The endpoint itself is a study
    view of the app that owns the column (it decides who may ask)::

        @study_view(COORDINATOR, ETHICS)
        def suggest_headsets(request, study):
            return suggestion_response(request, Headset.objects.all(), "headset_id")
    """
    term = request.GET.get("q", "").strip()[:LONGEST_TERM]
    return JsonResponse({"results": suggestions(queryset, field, term)})
