"""The audit view's filters, kept in the URL; the API reads the same parameters through the same form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from portal.audit import histories
from portal.audit.study_log import TARGET_TYPES, LogFilter
from portal.core.forms import RenderedOnce, date_input


class AuditFilter(RenderedOnce, forms.Form):
    """Call ``log()`` inside the study's scope: a recording or demonstrator is looked up among the study's own."""

    target_type = forms.CharField(required=False, max_length=100, label="Object type",
                                  widget=forms.TextInput(attrs={"list": "target-types", "autocomplete": "off",
                                                                "placeholder": "e.g. recordings.recording"}))
    target_id = forms.CharField(required=False, max_length=64, label="Object id")
    actor = forms.CharField(required=False, max_length=150, label="Actor", help_text="A username, exactly.")
    action = forms.CharField(required=False, max_length=81, label="Action",
                             help_text="Exactly, or a prefix ending in * (recording.*).")
    since = forms.DateField(required=False, widget=date_input(), label="From")
    until = forms.DateField(required=False, widget=date_input(), label="To")
    recording = forms.CharField(required=False, max_length=36, label="Recording (uid)",
                                help_text="Its history from upload to release.")
    demonstrator = forms.CharField(required=False, max_length=100, label="Demonstrator (designator)",
                                   help_text="Its history from consent to withdrawal.")

    target_types = TARGET_TYPES

    def clean_target_id(self) -> str:
        target_id = self.cleaned_data["target_id"].strip()
        if target_id and not (self.data.get("target_type") or "").strip():
            raise ValidationError("An object id needs its type.")
        return target_id

    def clean_recording(self) -> Any:
        """The study's recording of this uid (``histories``: its app finds it), or None."""
        return histories.named("recording").find(self.cleaned_data["recording"])

    def clean_demonstrator(self) -> Any:
        """The study's demonstrator of this designator, or None."""
        return histories.named("demonstrator").find(self.cleaned_data["demonstrator"])

    def log(self) -> LogFilter | None:
        """The filter, or None when the form is not valid (its errors say why)."""
        if not self.is_valid():
            return None
        data = self.cleaned_data
        return LogFilter(target_type=data["target_type"].strip(), target_id=data["target_id"],
                         actor=data["actor"].strip(), action=data["action"].strip(), since=data["since"],
                         until=data["until"], recording=data["recording"], demonstrator=data["demonstrator"])
