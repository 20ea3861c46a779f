from datetime import date, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from portal.studies.models import ConsentEvent, Demonstrator, Headset
from portal.studies.services.consent import give_consent


@pytest.fixture
def coordinator_client(client, coordinator):
    client.force_login(coordinator)
    return client


def _url(name, study, *args):
    return reverse(name, args=[study.code, *args])


def test_register_headset_and_duplicate_error(coordinator_client, study):
    url = _url("study-headsets", study)
    response = coordinator_client.post(url, {"headset_id": "HS-7", "model": "Quest 3"}, follow=True)
    assert "Headset HS-7 registered." in response.content.decode()
    response = coordinator_client.post(url, {"headset_id": "HS-7"})
    assert response.status_code == 400
    assert "headset ID &#x27;HS-7&#x27; is already registered in study alpha" in response.content.decode()


def test_a_coordinator_declares_when_a_headset_joined_the_study(coordinator_client, study):
    url = _url("study-headsets", study)
    coordinator_client.post(url, {"headset_id": "HS-7", "assigned_on": "2026-02-01"})
    with scope(study=study):
        headset = Headset.objects.get(headset_id="HS-7")
    assert headset.assigned_on == date(2026, 2, 1)
    page = coordinator_client.get(url).content.decode()
    assert 'name="assigned_on" value="2026-02-01"' in page
    moved = coordinator_client.post(_url("study-assign-headset", study, headset.pk), {"assigned_on": "2026-01-20"},
                                    follow=True)
    assert "Headset HS-7 is the study&#x27;s since 2026-01-20." in moved.content.decode()
    later = timezone.localdate() + timedelta(days=1)
    refused = coordinator_client.post(_url("study-assign-headset", study, headset.pk), {"assigned_on": later},
                                      follow=True)
    assert f"the headset cannot be the study&#x27;s from {later}, after its registration" in refused.content.decode()
    with scope(study=study):
        assert Headset.objects.get(pk=headset.pk).assigned_on == date(2026, 1, 20)


def test_csv_import_page_lists_the_bad_rows(coordinator_client, study):
    upload = SimpleUploadedFile("headsets.csv", b"headset_id,model\nHS-1,Q3\nX,Q3\n", content_type="text/csv")
    response = coordinator_client.post(_url("study-import-headsets", study), {"csv_file": upload})
    page = response.content.decode()
    assert response.status_code == 400
    assert "1 bad row(s); nothing was imported." in page
    assert "<td>3</td><td>headset ID &#x27;X&#x27; is shorter than two bytes of UTF-8</td>" in page
    with scope(study=study):
        assert not Headset.objects.exists()


def test_generate_button_ignores_typed_text(coordinator_client, study, headset):
    response = coordinator_client.post(_url("study-create-demonstrator", study),
                                       {"designator": "Jane Doe", "headset": headset.headset_id, "generate": "1"})
    assert response.status_code == 302
    with scope(study=study):
        assert Demonstrator.objects.get().designator != "jane doe"


def test_typed_name_is_refused_with_a_clear_error(coordinator_client, study):
    response = coordinator_client.post(_url("study-create-demonstrator", study), {"designator": "Jane Doe",
                                                                                 "typed": "1"})
    assert response.status_code == 400
    assert "must have 4 parts" in response.content.decode()


def test_consent_form_errors(coordinator_client, study, demonstrator, accepted_document):
    url = _url("study-give-consent", study, demonstrator.pk)
    future = timezone.localdate() + timedelta(days=3)
    page = coordinator_client.post(url, {"document": accepted_document.pk, "consent_date": future,
                                         "scopes": ["episode_release"]}).content.decode()
    assert "is in the future" in page
    page = coordinator_client.post(url, {"document": accepted_document.pk, "consent_date": "2025-06-01",
                                         "scopes": ["episode_release"]}).content.decode()
    assert "before consent document ICF-2026-03 v1 was issued (2026-01-01)" in page
    response = coordinator_client.post(url, {"document": accepted_document.pk, "consent_date": "2026-02-01",
                                             "scopes": ["episode_release"]})
    assert response.status_code == 302
    with scope(study=study):
        assert ConsentEvent.objects.get().event_date == date(2026, 2, 1)


def test_withdrawal_before_consent_error(coordinator_client, coordinator, study, demonstrator, accepted_document):
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 2, 1),
                 scopes=["episode_release"])
    response = coordinator_client.post(_url("study-withdraw-consent", study, demonstrator.pk),
                                       {"withdrawal_date": "2026-01-15", "reason": "asked"})
    assert response.status_code == 400
    assert "before the consent given on 2026-02-01" in response.content.decode()


def test_demonstrator_page_shows_timeline_and_coverage(coordinator_client, coordinator, study, demonstrator,
                                                        accepted_document):
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 2, 1),
                 scopes=["episode_release"])
    page = coordinator_client.get(_url("study-demonstrator", study, demonstrator.pk)).content.decode()
    assert 'class="event-given"' in page and "ICF-2026-03 v1" in page
    assert "consent of 2026-02-01 to ICF-2026-03 v1" in page
    assert "the consent does not include raw_audio_retention" in page


def test_ethics_officer_accepts_pending_documents(client, study, ethics, make_document):
    document = make_document()
    client.force_login(ethics)
    page = client.get(_url("study-consent-documents", study)).content.decode()
    assert 'data-document="ICF-2026-03-1"' in page and "Accept</button>" in page
    client.post(_url("study-accept-consent-document", study, document.pk))
    document.refresh_from_db()
    assert document.accepted_by == ethics
    dashboard = client.get("/").content.decode()
    assert "Consent documents to accept" in dashboard


def test_document_file_is_served_as_stored(client, study, ethics, make_document):
    document = make_document(text="I agree to take part.")
    client.force_login(ethics)
    response = client.get(_url("study-consent-document-file", study, document.pk))
    assert b"".join(response.streaming_content) == b"I agree to take part."


def test_settings_pages_change_policy_and_show_errors(coordinator_client, study):
    response = coordinator_client.post(_url("study-set-audio-policy", study), {"audio_policy": "retain-days"})
    assert response.status_code == 400
    assert "needs a number of days" in response.content.decode()
    coordinator_client.post(_url("study-set-audio-policy", study), {"audio_policy": "retain-days", "retain_days": 14})
    study.refresh_from_db()
    assert study.audio_policy_label == "retain-days 14"
    overview = coordinator_client.get(_url("study-overview", study)).content.decode()
    assert "retain-days 14" in overview and 'data-count="headsets"' in overview


def test_coordinator_dashboard_counts_the_registry(coordinator_client, study, headset, demonstrator, make_document):
    make_document()
    page = coordinator_client.get("/").content.decode()
    for label in ("Headsets registered", "Demonstrators", "Consent documents awaiting acceptance"):
        assert label in page
    assert page.count('<span class="count">1</span>') >= 3
