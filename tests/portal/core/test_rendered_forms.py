"""``RenderedOnce``: a form's HTML reused only for a form made of the same things with the same values, byte for
byte what Django's form templates write; forms with errors, files or queryset choices rendered every time."""

from __future__ import annotations

import pytest
from django import forms
from django.http import QueryDict
from django_scopes import scope

from portal.audit.forms import AuditFilter
from portal.core.forms import RENDERED_FORMS, RenderedOnce, date_input
from portal.recordings.views import EpisodeFilter, RecordingFilter, UploadForm
from portal.research.forms import BrowseFilter
from portal.studies.forms import DemonstratorForm, HeadsetForm, HeadsetImportForm
from portal.studies.models import Headset
from portal.studies.views import DemonstratorFilter, HeadsetFilter


class _Filter(RenderedOnce, forms.Form):
    kind = forms.ChoiceField(required=False)
    name = forms.CharField(required=False, max_length=5)
    day = forms.DateField(required=False, widget=date_input())

    def __init__(self, *args, kinds=("a", "b"), suggest="", **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [("", "any"), *((kind, kind) for kind in kinds)]
        if suggest:
            self.fields["name"].widget.attrs["data-suggest"] = suggest


def _django(form) -> str:
    """The form through Django's templates, not kept: a renderer given bypasses RenderedOnce."""
    return form.render(form.template_name_div, renderer=form.renderer)


def _query(text: str) -> QueryDict:
    return QueryDict(text)


def test_the_same_values_give_the_kept_html_and_it_is_djangos():
    first = _Filter(_query("kind=a&name=x&day=2026-01-02")).as_div()
    again = _Filter(_query("kind=a&name=x&day=2026-01-02"))
    assert again._rendering_key(again.template_name_div) in RENDERED_FORMS.html
    assert again.as_div() == first == _django(again)


@pytest.mark.parametrize("other", [
    {"data": _query("kind=b&name=x")},  # another value submitted
    {"data": _query("kind=a&name=%3Cb%3E")},  # markup, escaped as Django escapes it
    {"data": _query("kind=a&name=x"), "kinds": ("a", "c")},  # other choices set by __init__
    {"data": _query("kind=a&name=x"), "suggest": "/studies/beta/suggest/"},  # a widget attribute set by __init__
    {"data": _query("kind=a&name=x"), "prefix": "f"},
    {"data": None},  # not submitted
    {"data": None, "initial": {"name": "y"}},
])
def test_anything_the_html_is_made_of_gives_its_own_html(other):
    _Filter(_query("kind=a&name=x")).as_div()
    data = other.pop("data")
    form = _Filter(data, **other)
    assert form.as_div() == _django(form)
    assert form.as_div() != _Filter(_query("kind=a&name=x")).as_div()


class _Search(RenderedOnce, forms.Form):
    q = forms.CharField(required=False)


def test_a_long_submitted_value_is_not_kept():
    kept, long = _Search(_query("q=" + "x" * 200)), _Search(_query("q=" + "x" * 201))
    assert not kept.errors and not long.errors
    assert kept._rendering_key(kept.template_name_div) is not None
    assert long._rendering_key(long.template_name_div) is None
    assert long.as_div() == _django(long)


def test_a_form_with_errors_is_rendered_every_time():
    form = _Filter(_query("kind=zzz&name=toolong&day=no"))
    assert form._rendering_key(form.template_name_div) is None
    html = form.as_div()
    assert "errorlist" in html and html == _django(form)


def test_choices_read_from_a_queryset_are_not_kept(db):
    class _Pick(RenderedOnce, forms.Form):
        headset = forms.ModelChoiceField(queryset=Headset.objects.none())

    assert _Pick()._rendering_key("django/forms/div.html") is None


@pytest.mark.parametrize("query", ["", "state=exported&headset=HS-1&recorded_from=2026-01-01", "headset=%22%3E"])
def test_the_list_pages_forms_are_what_django_writes(study, query):
    from portal.access.models import Role  # noqa: F401  (the apps are loaded)

    with scope(study=study):
        headsets = Headset.objects.filter(retired_on__isnull=True)
        made = [
            lambda: RecordingFilter(_query(query), study=study), lambda: UploadForm(),
            lambda: EpisodeFilter(_query("receipt=verified" if query else "")),
            lambda: HeadsetFilter(_query("q=HS&retired=no" if query else "")), lambda: HeadsetForm(),
            lambda: HeadsetImportForm(), lambda: DemonstratorFilter(_query("q=ab" if query else "")),
            lambda: DemonstratorForm(headsets=headsets, suggest_url="/studies/alpha/headsets/suggest/"),
            lambda: AuditFilter(_query("actor=someone&since=2026-01-01" if query else "")),
            lambda: BrowseFilter(_query("designator=x" if query else "")),
        ]
        for make in made:
            fresh, kept = make(), make()
            assert kept.as_div() == kept.as_div() == _django(fresh), type(fresh).__name__
