"""The audit view's filters, kept in the URL; the API reads the same parameters through the same form."""

from __future__ import annotations

import uuid

from django import forms
from django.core.exceptions import ValidationError

from portal.audit.study_log import TARGET_TYPES, LogFilter
from portal.core.forms import date_input
from portal.recordings.models import Recording
from portal.studies.models import Demonstrator
from portal.studies.services.demonstrators import normalise_designator


class AuditFilter(forms.Form):
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

    def clean_recording(self) -> Recording | None:
        value = self.cleaned_data["recording"].strip()
        if not value:
            return None
        try:
            uid = uuid.UUID(value)
        except ValueError:
            raise ValidationError("Not a recording's uid.") from None
        recording = Recording.objects.filter(uid=uid).only("pk", "uid", "capture_id", "original_name").first()
        if recording is None:
            raise ValidationError("No recording of this study has this uid.")
        return recording

    def clean_demonstrator(self) -> Demonstrator | None:
        designator = normalise_designator(self.cleaned_data["demonstrator"])
        if not designator:
            return None
        demonstrator = Demonstrator.objects.filter(designator=designator).only("pk", "designator").first()
        if demonstrator is None:
            raise ValidationError("No demonstrator of this study has this designator.")
        return demonstrator

    def log(self) -> LogFilter | None:
        """The filter, or None when the form is not valid (its errors say why)."""
        if not self.is_valid():
            return None
        data = self.cleaned_data
        return LogFilter(target_type=data["target_type"].strip(), target_id=data["target_id"],
                         actor=data["actor"].strip(), action=data["action"].strip(), since=data["since"],
                         until=data["until"], recording=data["recording"], demonstrator=data["demonstrator"])
