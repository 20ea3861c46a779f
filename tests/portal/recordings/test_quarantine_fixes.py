"""A quarantined recording links each problem to the registry page that fixes it, for the viewer's roles; the
source's claims are shown only once the source has been read."""

from __future__ import annotations

import io
import re
import shutil
from datetime import date, timedelta

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.recordings.models import Recording
from portal.recordings.quarantine import registry_fixes
from portal.recordings.services.ingest import ingest_path, receive_upload
from portal.studies.services.consent import give_consent, upload_consent_document
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.study import set_study_status

pytestmark = pytest.mark.django_db

COORDINATOR, ETHICS = frozenset({"coordinator"}), frozenset({"ethics_officer"})


def ingest(reg, path) -> Recording:
    with scope(study=reg.study):
        return ingest_path(reg.coordinator, reg.study, path)


def fixes(reg, recording, roles=COORDINATOR) -> list[tuple[str, str, str]]:
    with scope(study=reg.study):
        return [(fix.problem, fix.page, fix.url) for fix in registry_fixes(recording, roles)]


def test_an_unregistered_headset_links_to_the_headsets_page_for_coordinators_only(reg, make_capture):
    recording = ingest(reg, make_capture(reg.claims(headset_id="HS-404")))
    assert fixes(reg, recording) == [("headset", "Headsets", reverse("study-headsets", args=[reg.study.code]))]
    assert fixes(reg, recording, ETHICS) == [], "ethics officers cannot open the headsets page"


def test_an_unregistered_or_blank_designator_points_to_registering_it_from_the_page(reg, make_capture):
    unknown = ingest(reg, make_capture(reg.claims(demonstrator_id="nobody-known-here-ever")))
    blank = ingest(reg, make_capture(reg.claims(demonstrator_id="")))
    expected = [("demonstrator", "Register the demonstrator", "#register-demonstrator")]
    assert fixes(reg, unknown) == fixes(reg, blank) == expected
    assert fixes(reg, unknown, ETHICS) == [], "only a coordinator registers demonstrators"


def test_missing_consent_links_to_the_demonstrators_consent(reg, make_capture):
    with scope(study=reg.study):
        demonstrator = create_demonstrator(reg.coordinator, reg.study, headset=reg.headset)
    recording = ingest(reg, make_capture(reg.claims(demonstrator_id=demonstrator.designator)))
    url = reverse("study-demonstrator", args=[reg.study.code, demonstrator.pk])
    assert fixes(reg, recording) == [("consent", "Consent", url)]


def test_a_consent_document_awaiting_acceptance_links_to_the_consent_documents(reg, make_capture):
    with scope(study=reg.study):
        demonstrator = create_demonstrator(reg.coordinator, reg.study, headset=reg.headset)
        document = upload_consent_document(
            reg.coordinator, reg.study, identifier="ICF-2026-04", version="1",
            uploaded_file=io.BytesIO(b"Not yet accepted."), issued_on=date.today() - timedelta(days=60))
        give_consent(reg.coordinator, demonstrator, document=document,
                              consent_date=date.today() - timedelta(days=30), scopes=["episode_release"])
    recording = ingest(reg, make_capture(reg.claims(demonstrator_id=demonstrator.designator)))
    assert recording.state == Recording.State.QUARANTINED
    assert fixes(reg, recording, ETHICS) == [
        ("consent_document", "Consent documents", reverse("study-consent-documents", args=[reg.study.code]))]


def test_a_closed_study_links_to_its_settings_and_no_other_state_has_fixes(reg, make_capture):
    accepted = ingest(reg, make_capture(reg.claims()))
    assert accepted.state == Recording.State.QUEUED and fixes(reg, accepted) == []
    with scope(study=reg.study):
        set_study_status(reg.coordinator, reg.study, "closed")
    recording = ingest(reg, make_capture(reg.claims()))
    assert fixes(reg, recording) == [("study", "Settings", reverse("study-settings", args=[reg.study.code]))]


def test_the_detail_page_links_the_fix_and_shows_claims_once_read(client, reg, make_capture, tmp_path):
    quarantined = ingest(reg, make_capture(reg.claims(headset_id="HS-404")))
    client.force_login(reg.coordinator)
    page = client.get(reverse("recording-detail", args=[reg.study.code, quarantined.uid])).content.decode()
    assert re.search(r'<li data-problem="headset"><a href="/studies/[^/]+/headsets/">Headsets</a>: '
                     r"register headset &#x27;HS-404&#x27;", page)
    assert "(claimed: HS-404)" in page

    archive = shutil.make_archive(str(tmp_path / "upload"), "zip", root_dir=tmp_path / "sources")
    with scope(study=reg.study), open(archive, "rb") as stream:
        received = receive_upload(reg.coordinator, reg.study, stream, name="upload.zip", via="upload")
    page = client.get(reverse("recording-detail", args=[reg.study.code, received.uid])).content.decode()
    assert received.state == Recording.State.RECEIVED
    assert "(claimed:" not in page
    assert "The source has not been read yet" in page
