"""``display.labels`` gives what ``get_FOO_display()`` gives, for every choice and for a value outside them."""

import pytest

from portal.core import display
from portal.recordings.models import Recording


@pytest.mark.parametrize(("field", "choices"), [("state", Recording.State), ("audio", Recording.Audio)])
def test_labels_are_the_models_display(field, choices):
    label = display.labels(choices.choices)
    for value in [*choices.values, "no-such-value"]:
        recording = Recording(**{field: value})
        assert label(value) == getattr(recording, f"get_{field}_display")()
        assert type(label(value)) is str
