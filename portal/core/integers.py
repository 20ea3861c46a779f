"""Integers from outside (a URL, a form, a query string, JSON) are range-checked before they reach a query.

A number past what a column holds used to answer 500 (SQLite: "Python int too large to convert to SQLite
INTEGER"; PostgreSQL: "integer out of range"). Every integer the portal reads from a request is at least 0 and
at most ``MAX_INT`` (the largest PostgreSQL ``integer``; no id, number or index the portal hands out comes near
it), unless a field says tighter. Out of range is a bad request (400) naming the value:

- URLs: ``<uint:name>`` (registered here) instead of ``<int:name>``;
- pages: ``parse_int`` for a value read by hand, ``IntegerField`` for a form field;
- the API: ``api_integer`` for a serializer field (DRF answers its ``ValidationError`` with 400),
  ``ApiLookupMiddleware`` for the numbered lookups of DRF's routes (regular expressions the router makes), and
  ``IntegerOutOfRange`` raised anywhere is answered 400 by ``api_exception_handler``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import BadRequest
from django.http import JsonResponse
from django.urls import register_converter

MAX_INT = 2**31 - 1


class IntegerOutOfRange(BadRequest):
    """A request's integer is not a whole number in the range it must be in; the message names it."""


def parse_int(value: Any, what: str, *, low: int = 0, high: int = MAX_INT) -> int:
    """``value`` (text of decimal digits, or an int) as an int in ``low`` .. ``high``; ``IntegerOutOfRange``
    naming ``what`` otherwise."""
    if isinstance(value, bool):
        raise IntegerOutOfRange(f"{what} must be a whole number, not {value!r}")
    if isinstance(value, str):
        text = value.strip()
        shown = text if len(text) <= 40 else text[:40] + "…"
        if not text.isascii() or not text.removeprefix("-").isdigit():
            raise IntegerOutOfRange(f"{what} must be a whole number, not {shown!r}")
        if len(text) > 20:  # past any bound, and not worth converting
            raise IntegerOutOfRange(f"{what} must be between {low} and {high}, not {shown}")
        value = int(text)
    if not isinstance(value, int):
        raise IntegerOutOfRange(f"{what} must be a whole number, not {value!r}")
    if not low <= value <= high:
        raise IntegerOutOfRange(f"{what} must be between {low} and {high}, not {value}")
    return value


class IntegerField(forms.IntegerField):
    """A form's whole number, at least 0 and at most ``MAX_INT`` unless given tighter bounds: a bigger one is a
    form error naming the bound, never a value handed on to a query or a save."""

    def __init__(self, *, min_value: int | None = 0, max_value: int | None = MAX_INT, **kwargs):
        super().__init__(min_value=0 if min_value is None else max(min_value, 0),
                         max_value=MAX_INT if max_value is None else min(max_value, MAX_INT), **kwargs)


def api_integer(*, min_value: int = 0, max_value: int = MAX_INT, **kwargs):
    """A serializer's whole number, bounded like ``IntegerField``: DRF answers a value out of range with 400."""
    from rest_framework import serializers

    return serializers.IntegerField(min_value=min_value, max_value=min(max_value, MAX_INT), **kwargs)


class BoundedIntConverter:
    """``<uint:name>``: decimal digits, at most ``MAX_INT``; a longer or larger number is answered 400 (the path
    names a number no object can have), not matched as another route or looked up."""

    regex = "[0-9]+"

    def to_python(self, value: str) -> int:
        return parse_int(value, "a number in the address")

    def to_url(self, value: int) -> str:
        return str(parse_int(value, "a number in the address"))


register_converter(BoundedIntConverter, "uint")


# The URL arguments of DRF's routes that hold numbers: lookups (``pk``, ``number``, ``seq``) and the review's
# ``episode_index``.
API_NUMBERED_LOOKUPS = frozenset({"pk", "number", "seq", "episode_index"})


class ApiLookupMiddleware:
    """The API's numbered lookups range-checked before the view runs (whatever the method): a number past
    ``MAX_INT`` is answered 400 with JSON naming it. Other text (``pk`` ``abc``) is left to the view's lookup."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if not hasattr(view_func, "cls"):  # pages: their routes use <uint:>
            return None
        for name in sorted(API_NUMBERED_LOOKUPS & view_kwargs.keys()):
            value = view_kwargs[name]
            if isinstance(value, str) and value.isascii() and value.isdigit():
                try:
                    parse_int(value, f"{name} in the address")
                except IntegerOutOfRange as exc:
                    return JsonResponse({"detail": str(exc)}, status=400)
        return None
