"""Form pieces every app's pages share."""

from __future__ import annotations

import threading
from collections.abc import Hashable

from django import forms
from django.forms.widgets import ChoiceWidget
from django.utils.hashable import make_hashable


def date_input() -> forms.DateInput:
    """A browser date picker; its value is written as ISO 8601, the only form ``<input type="date">`` reads (the
    portal's locale would write 21/12/2026, which the browser shows as an empty field)."""
    return forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")


class _RenderedForms:
    """The HTML of forms by what they are made of, the oldest dropped beyond ``size`` (shared by the threads of a
    process: a form's HTML is the same for everyone who submits the same values)."""

    def __init__(self, size: int):
        self.size, self.html, self.lock = size, {}, threading.Lock()

    def get(self, key: Hashable) -> str | None:
        return self.html.get(key)

    def put(self, key: Hashable, html: str) -> None:
        with self.lock:
            self.html[key] = html
            while len(self.html) > self.size:
                del self.html[next(iter(self.html))]


RENDERED_FORMS = _RenderedForms(512)
LONGEST_KEPT_VALUE = 200  # characters of a submitted value; a form with a longer one is rendered every time


class RenderedOnce:
    """A form mixin (before ``forms.Form``): its HTML rendered through Django's form templates once per process
    for each set of values, then reused (two small forms cost a list page about 3 ms through the templates).

    The key is everything the templates read: the class and template, prefix, ``auto_id`` and the other options
    of the form; each field's class, label, help text, required, disabled, initial value and widget (its class,
    attributes, choices and format, whatever ``__init__`` set); the submitted value of each field as the widget
    reads it. A form with errors, files, or a menu whose choices come from a queryset or a callable is rendered every
    time."""

    def _rendering_key(self, template_name: str) -> Hashable | None:
        if self.files or self.errors:  # the errors are computed as rendering would
            return None
        fields = []
        for name, field in self.fields.items():
            widget = field.widget
            choices = ()
            if isinstance(widget, ChoiceWidget):
                if not isinstance(widget.choices, list | tuple):  # read from a queryset or a callable
                    return None
                choices = widget.choices
            # A ModelChoiceField gives its (unread) queryset's choices to any widget: a text input prints none.
            widget_state = {key: value for key, value in vars(widget).items() if key not in ("choices", "_choices")}
            value = (widget.value_from_datadict(self.data, self.files, self.add_prefix(name))
                     if self.is_bound else None)
            if isinstance(value, str) and len(value) > LONGEST_KEPT_VALUE:  # not worth a place among the kept
                return None
            fields.append((name, type(field), field.label, field.help_text, field.required, field.disabled,
                           field.show_hidden_initial, field.localize, field.label_suffix,
                           getattr(field, "template_name", None), self.get_initial_for_field(field, name),
                           type(widget), widget_state, choices, value))
        try:
            return make_hashable((type(self), template_name, self.is_bound, self.prefix, self.auto_id,
                                  self.label_suffix, self.use_required_attribute,
                                  getattr(self, "error_css_class", None), getattr(self, "required_css_class", None),
                                  type(self.renderer), fields))
        except TypeError:  # a value that cannot be a key (an object without a hash): rendered every time
            return None

    def render(self, template_name=None, context=None, renderer=None):
        if context is not None or renderer is not None:
            return super().render(template_name, context, renderer)
        template_name = template_name or self.template_name
        key = self._rendering_key(template_name)
        if key is None:
            return super().render(template_name)
        html = RENDERED_FORMS.get(key)
        if html is None:
            html = super().render(template_name)
            RENDERED_FORMS.put(key, html)
        return html

    __str__ = __html__ = render
