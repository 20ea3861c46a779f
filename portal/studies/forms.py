"""Registry forms: they parse and check input shape; the rules live in ``services``."""

from __future__ import annotations

from django import forms

from exporter.cards import DEFAULT_LICENCE, LICENCES
from portal.core import integers
from portal.core.forms import RenderedOnce, date_input
from portal.studies.models import ConsentDocument, ConsentEvent, Headset, Study


class HeadsetForm(RenderedOnce, forms.Form):
    headset_id = forms.CharField(label="Headset ID", max_length=128, strip=True,
                                 help_text="Assigned by the study, e.g. DEMO-HS-01; 2 characters or more.")
    model = forms.CharField(max_length=128, required=False)
    assigned_on = forms.DateField(
        label="In the study since", required=False, widget=date_input(),
        help_text="The first day the headset was the study's (blank: today). Recordings made before it cannot be "
                  "released; never later than today.")


class HeadsetImportForm(RenderedOnce, forms.Form):
    csv_file = forms.FileField(label="CSV file", help_text="Columns: headset_id, model and assigned_on (YYYY-MM-DD, "
                                                           "blank: today) optional. All rows or none.")


class AssignHeadsetForm(forms.Form):
    assigned_on = forms.DateField(label="In the study since", widget=date_input())


class RetireHeadsetForm(forms.Form):
    retired_on = forms.DateField(label="Retired on", widget=date_input())


class DemonstratorForm(RenderedOnce, forms.Form):
    designator = forms.CharField(max_length=100, required=False, strip=True,
                                 help_text="Leave blank (or press Generate) for a new readable designator. "
                                           "Never a person's name.")
    # Typed (with suggestions from the registry while typing), not a menu of every headset of the study.
    headset = forms.ModelChoiceField(
        queryset=Headset.objects.none(), required=False, to_field_name="headset_id", label="Headset ID",
        help_text="The family pair comes from this headset's ID.",
        error_messages={"invalid_choice": "No headset in use in this study has this ID."},
        widget=forms.TextInput(attrs={"list": "headset-suggestions", "autocomplete": "off"}))

    def __init__(self, *args, headsets=None, suggest_url: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        if headsets is not None:
            self.fields["headset"].queryset = headsets
        if suggest_url:
            self.fields["headset"].widget.attrs["data-suggest"] = suggest_url


class ConsentForm(forms.Form):
    document = forms.ModelChoiceField(queryset=ConsentDocument.objects.none(), label="Consent document")
    consent_date = forms.DateField(widget=date_input())
    scopes = forms.MultipleChoiceField(choices=ConsentEvent.Scope.choices, widget=forms.CheckboxSelectMultiple,
                                       initial=[ConsentEvent.Scope.EPISODE_RELEASE])

    def __init__(self, *args, documents=None, **kwargs):
        super().__init__(*args, **kwargs)
        if documents is not None:
            self.fields["document"].queryset = documents


class WithdrawalForm(forms.Form):
    withdrawal_date = forms.DateField(widget=date_input())
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000)


class ConsentDocumentForm(forms.Form):
    identifier = forms.CharField(max_length=64, help_text="e.g. ICF-2026-03")
    version = forms.CharField(max_length=32)
    issued_on = forms.DateField(required=False, widget=date_input(),
                                help_text="Blank: today. No consent may predate it.")
    document = forms.FileField(help_text="The exact PDF or text the demonstrators see.")


class StudyStatusForm(forms.Form):
    status = forms.ChoiceField(choices=Study.Status.choices)


class AudioPolicyForm(forms.Form):
    audio_policy = forms.ChoiceField(choices=Study.AudioPolicy.choices)
    retain_days = integers.IntegerField(min_value=1, required=False, help_text="Only for the retain-days policy.")


class FacePolicyForm(forms.Form):
    face_policy = forms.ChoiceField(choices=Study.FacePolicy.choices, label="Face policy",
                                    help_text="Applies to release requests made after the change.")


class ApprovalsForm(forms.Form):
    approvals_required = forms.IntegerField(min_value=1, max_value=20, label="Approvals a release needs",
                                            help_text="Distinct ethics officers, never the requester. Fewer than "
                                                      "2 waits for another ethics officer's confirmation.")


class ConfirmApprovalsForm(forms.Form):
    approvals_required = forms.IntegerField(min_value=1, max_value=20, widget=forms.HiddenInput,
                                            help_text="The number awaiting confirmation, as shown.")


class ApprovalSecondFactorForm(forms.Form):
    approval_second_factor = forms.BooleanField(
        required=False, label="Approving a release needs a fresh second factor",
        help_text="Ethics officers enter a code from their authenticator unless they passed it in the last minutes.")


class CarryOverApprovalsForm(forms.Form):
    carry_over_approvals = forms.BooleanField(
        required=False, label="A release superseded after a withdrawal keeps its approvals",
        help_text="Off (the default): the release of the other episodes goes back to the ethics officers' review.")


class DataUseAgreementForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), label="New data-use agreement text")
    licence = forms.ChoiceField(
        choices=[(key, key) for key in LICENCES], initial=DEFAULT_LICENCE, label="Licence of released data",
        help_text="An SPDX identifier, or 'other': the agreement itself is the only licence (controlled access). "
                  "Every release's dataset card, Croissant metadata and citation name it.")
