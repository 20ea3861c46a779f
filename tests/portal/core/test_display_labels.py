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
