"""Form pieces every app's pages share."""

from django import forms


def date_input() -> forms.DateInput:
    """A browser date picker; its value is written as ISO 8601, the only form ``<input type="date">`` reads (the
    portal's locale would write 21/12/2026, which the browser shows as an empty field)."""
    return forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
