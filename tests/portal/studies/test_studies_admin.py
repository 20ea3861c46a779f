from datetime import date

import pytest
from django.urls import reverse

from portal.studies.services.consent import give_consent


@pytest.fixture
def staff_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-pw-pw-pw-"))
    return client


def test_consent_events_are_read_only_in_the_admin(staff_client, coordinator, demonstrator, accepted_document):
    event = give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 2, 1),
                         scopes=["episode_release"])
    change_url = reverse("admin:studies_consentevent_change", args=[event.pk])
    assert staff_client.get(change_url).status_code == 200  # view only
    assert staff_client.post(change_url, {"reason": "edited"}).status_code == 403
    assert staff_client.post(reverse("admin:studies_consentevent_delete", args=[event.pk])).status_code == 403
    assert staff_client.get(reverse("admin:studies_consentevent_add")).status_code == 403


def test_admin_accept_goes_through_the_service(staff_client, make_document, make_user, study):
    document = make_document()
    url = reverse("admin:studies_consentdocument_changelist")
    data = {"action": "accept", "_selected_action": [document.pk]}
    page = staff_client.post(url, data, follow=True).content.decode()
    assert "only an ethics officer of study alpha can accept" in page
    document.refresh_from_db()
    assert not document.is_accepted
    root = document.uploaded_by.__class__.objects.get(username="root")
    from portal.access.services import grant_role

    grant_role("test", root, study, "ethics_officer")
    staff_client.post(url, data)
    document.refresh_from_db()
    assert document.accepted_by == root


def test_an_administrator_creating_a_study_cannot_choose_its_face_policy(staff_client):
    """The policy is the study's ethics officers' decision: the admin's add form shows the default, read-only, and
    a posted value is ignored."""
    from django_scopes import scopes_disabled

    from portal.studies.models import Study

    url = reverse("admin:studies_study_add")
    assert 'name="face_policy"' not in staff_client.get(url).content.decode()
    staff_client.post(url, {"code": "nofaces", "title": "No faces", "project_id": "", "status": "draft",
                            "audio_policy": "discard", "approvals_required": 2, "pending_approvals_required": "",
                            "carry_over_approvals": "on", "face_policy": "off"})
    with scopes_disabled():
        assert Study.objects.get(code="nofaces").face_policy == Study.FacePolicy.REDACT
