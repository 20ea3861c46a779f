"""The study's face policy: new studies redact; only its ethics officers change it, audited; the settings page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.audit.models import AuditEvent
from portal.studies.exceptions import RegistryError
from portal.studies.models import Study
from portal.studies.services.face_policy import FacePolicyRefused, set_face_policy

pytestmark = pytest.mark.django_db


def test_a_new_study_redacts_and_only_an_ethics_officer_changes_it_audited(make_study, make_user):
    study = make_study("faces-new")
    assert study.face_policy == Study.FacePolicy.REDACT
    coordinator = make_user("fn-coord", study, ["coordinator"])
    officer = make_user("fn-ethics", study, ["ethics_officer"])
    other = make_user("fn-other", make_study("faces-other"), ["ethics_officer"])
    for refused in (coordinator, other):
        with pytest.raises(FacePolicyRefused, match="only an ethics officer of study faces-new"):
            set_face_policy(refused, study, "off")
    with pytest.raises(RegistryError, match="unknown face policy 'blur'"):
        set_face_policy(officer, study, "blur")
    set_face_policy(officer, study, "detect")
    study.refresh_from_db()
    assert study.face_policy == "detect"
    event = AuditEvent.objects.filter(study_id=study.pk, action="study.face_policy_changed").get()
    assert event.before["face_policy"] == "redact" and event.after["face_policy"] == "detect"


def test_the_settings_page_shows_the_policy_and_an_officer_changes_it(client, make_study, make_user):
    study = make_study("faces-page")
    officer = make_user("fp-ethics", study, ["ethics_officer"])
    coordinator = make_user("fp-coord", study, ["coordinator"])
    client.force_login(coordinator)
    page = client.get(reverse("study-settings", args=[study.code])).content.decode()
    assert "Bystanders' faces" in page and 'id="set-face-policy"' not in page
    assert client.post(reverse("study-set-face-policy", args=[study.code]), {"face_policy": "off"}).status_code == 403
    client.force_login(officer)
    assert 'id="set-face-policy"' in client.get(reverse("study-settings", args=[study.code])).content.decode()
    response = client.post(reverse("study-set-face-policy", args=[study.code]), {"face_policy": "off"})
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.face_policy == "off"


def test_the_api_names_the_policy(client, make_study, make_user):
    study = make_study("faces-api")
    client.force_login(make_user("fa-ethics", study, ["ethics_officer"]))
    assert client.get(f"/api/studies/{study.code}/").json()["face_policy"] == "redact"
