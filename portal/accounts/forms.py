from __future__ import annotations

from django import forms
from django.conf import settings

from portal.access.permissions import studies_for
from portal.core import integers


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. “lab workstation export script”.")
    study = forms.ModelChoiceField(queryset=None, required=False, empty_label="All my studies",
                                   help_text="Limit the token to one study.")
    days = integers.IntegerField(min_value=1, label="Valid for (days)")

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["study"].queryset = studies_for(user).order_by("code")
        self.fields["study"].to_field_name = "code"
        self.fields["days"].max_value = settings.CERES_TOKEN_DAYS
        self.fields["days"].initial = settings.CERES_TOKEN_DAYS
        self.fields["days"].widget.attrs["max"] = settings.CERES_TOKEN_DAYS


class CodeForm(forms.Form):
    code = forms.CharField(max_length=12, label="Code from your authenticator app",
                           widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric",
                                                         "autofocus": True}))


class EnrolmentCodeForm(forms.Form):
    enrolment_code = forms.CharField(max_length=40, label="Enrolment code from a site administrator",
                                     widget=forms.TextInput(attrs={"autocomplete": "off", "autofocus": True}))


class UnlockForm(forms.Form):
    username = forms.CharField(max_length=150)


class RecoveryCodeForm(forms.Form):
    recovery_code = forms.CharField(max_length=40, label="Recovery code",
                                    help_text="One of the codes you were shown when you set up the second factor.",
                                    widget=forms.TextInput(attrs={"autocomplete": "off"}))


class EmailForm(forms.Form):
    address = forms.CharField(max_length=254, label="New email address",
                              widget=forms.EmailInput(attrs={"autocomplete": "email"}))
