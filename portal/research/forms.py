"""Forms shared by the research pages and the API: the filters of released episodes."""

from __future__ import annotations

from django import forms

from portal.core.forms import RenderedOnce, date_input
from portal.releases.models import EpisodeTag
from portal.research.services import catalogue


class BrowseFilter(RenderedOnce, forms.Form):
    task = forms.ChoiceField(required=False)
    outcome = forms.ChoiceField(required=False)
    designator = forms.CharField(required=False, max_length=100)
    recorded_from = forms.DateField(required=False, widget=date_input())
    recorded_to = forms.DateField(required=False, widget=date_input())
    release = forms.TypedChoiceField(required=False, coerce=int, empty_value=None)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The released episodes as this request reads them (the browse page lists them too: one query fewer) and
        # every menu's values.
        self.released, values, numbers = catalogue.browse_menus()
        for kind, kind_values in values.items():
            self.fields[kind].choices = [("", f"any {kind}"), *((value, value) for value in kind_values)]
        self.fields["release"].choices = [("", "any release"), *(
            (number, f"release-{number:04d}") for number in numbers)]

    def apply(self, items):
        if not self.is_valid():
            return items.none()
        data = self.cleaned_data
        for kind in EpisodeTag.Kind.values:
            if data[kind]:  # one tag row per episode matches (kind, value) is unique per episode: no duplicates
                items = items.filter(episode__tags__kind=kind, episode__tags__value=data[kind])
        if data["designator"]:
            items = items.filter(episode__recording__demonstrator__designator=data["designator"].strip())
        if data["recorded_from"]:
            items = items.filter(episode__recording__recorded_at__date__gte=data["recorded_from"])
        if data["recorded_to"]:
            items = items.filter(episode__recording__recorded_at__date__lte=data["recorded_to"])
        if data["release"]:
            items = items.filter(request__number=data["release"])
        return items
