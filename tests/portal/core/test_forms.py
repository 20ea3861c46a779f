"""Date fields render a value the browser's date picker shows (ISO 8601), whatever the portal's locale."""

from datetime import date

from django import forms

from portal.core.forms import date_input


class _Form(forms.Form):
    day = forms.DateField(widget=date_input())


def test_an_initial_date_is_written_as_iso_for_the_date_picker(settings):
    settings.LANGUAGE_CODE = "en-gb"  # whose own format, 21/12/2026, a date input shows as an empty field
    html = str(_Form(initial={"day": date(2026, 12, 21)})["day"])
    assert 'type="date"' in html and 'value="2026-12-21"' in html
