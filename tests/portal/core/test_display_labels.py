"""``display.labels`` gives what ``get_FOO_display()`` gives, for every choice and for a value outside them."""

import pytest

from portal.core import display
from portal.recordings.models import Episode, Recording


@pytest.mark.parametrize(("model", "field", "choices"), [(Recording, "state", Recording.State),
                                                         (Recording, "audio", Recording.Audio),
                                                         (Episode, "receipt_status", Episode.Receipt)])
def test_labels_are_the_models_display(model, field, choices):
    label = display.labels(choices.choices)
    for value in [*choices.values, "no-such-value"]:
        instance = model(**{field: value})
        assert label(value) == getattr(instance, f"get_{field}_display")()
        assert type(label(value)) is str


def test_row_html_escapes_as_format_html_does():
    from django.utils.html import format_html
    from django.utils.safestring import SafeString, mark_safe

    from portal.core.display import row_html

    values = {"text": "a&b<c>\"d'", "number": 42, "safe": mark_safe("<b>kept</b>"), "none": None, "empty": ""}
    template = "<td>{text}</td><td>{number}</td><td>{safe}</td><td>{none}</td><td>{empty}</td>"
    html = row_html(template, **values)
    assert html == format_html(template, **values) and isinstance(html, SafeString)
    assert "&lt;c&gt;&quot;d&#x27;" in html and "<b>kept</b>" in html


@pytest.mark.parametrize("text", ["", "short", "x" * 89, "x" * 90, "x" * 91, "y" * 300, "e\u0301" * 60,
                                  "e\u0301" * 100, "\u00e9" * 95, "a & <b> " * 20, 12345])
@pytest.mark.parametrize("length", [0, 1, 17, 90, 140])
def test_chars_is_truncators(text, length):
    """``display.chars`` gives what ``Truncator(text).chars(length)`` gives (``truncatechars``): cut or not, with
    combining characters (which do not count) and text that is not in NFC."""
    from django.utils.text import Truncator

    assert display.chars(text, length) == Truncator(text).chars(length)
