import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from portal.accounts.services import issue_token
from portal.audit.models import AuditEvent


@pytest.fixture
def api(coordinator):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(coordinator, name='tests')[1]}")
    return client


def test_token_client_registers_and_filters_headsets(api, study):
    response = api.post("/api/studies/alpha/headsets/", {"headset_id": "HS-1", "model": "Quest 3"}, format="json")
    assert response.status_code == 201 and response.json()["registered_by"] == "coord"
    duplicate = api.post("/api/studies/alpha/headsets/", {"headset_id": "HS-1"}, format="json")
    assert duplicate.status_code == 400
    assert duplicate.json() == {"detail": "headset ID 'HS-1' is already registered in study alpha"}
    api.post("/api/studies/alpha/headsets/", {"headset_id": "HS-2"}, format="json")
    headset_pk = api.get("/api/studies/alpha/headsets/?headset_id=HS-2").json()["results"][0]["id"]
    retired = api.post(f"/api/studies/alpha/headsets/{headset_pk}/retire/", {"retired_on": "2026-05-01"},
                       format="json")
    assert retired.json()["retired_on"] == "2026-05-01"
    declared = api.post("/api/studies/alpha/headsets/", {"headset_id": "HS-3", "assigned_on": "2026-01-15"},
                        format="json")
    assert declared.status_code == 201 and declared.json()["assigned_on"] == "2026-01-15"
    moved = api.post(f"/api/studies/alpha/headsets/{declared.json()['id']}/assigned-on/",
                     {"assigned_on": "2026-01-10"}, format="json")
    assert moved.status_code == 200 and moved.json()["assigned_on"] == "2026-01-10"
    later = api.post(f"/api/studies/alpha/headsets/{declared.json()['id']}/assigned-on/",
                     {"assigned_on": "2999-01-01"}, format="json")
    assert later.status_code == 400 and "after its registration on" in later.json()["detail"]
    api.post(f"/api/studies/alpha/headsets/{declared.json()['id']}/retire/", {"retired_on": "2026-06-01"},
             format="json")
    in_use = api.get("/api/studies/alpha/headsets/?retired=false").json()
    assert [h["headset_id"] for h in in_use["results"]] == ["HS-1"] and in_use["count"] == 1
    assert api.get("/api/studies/alpha/headsets/?retired=maybe").status_code == 400


def test_csv_import_reports_rows(api, study):
    upload = SimpleUploadedFile("h.csv", b"headset_id\nHS-1\nA\n")
    response = api.post("/api/studies/alpha/headsets/import/", {"csv_file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"row": 3, "reason": "headset ID 'A' is shorter than two bytes of UTF-8"}]
    upload = SimpleUploadedFile("h.csv", b"headset_id\nHS-1\nHS-2\n")
    response = api.post("/api/studies/alpha/headsets/import/", {"csv_file": upload}, format="multipart")
    assert [h["headset_id"] for h in response.json()] == ["HS-1", "HS-2"]


def test_pagination(api, study):
    rows = "".join(f"HS-{n:03d}\n" for n in range(53))
    upload = SimpleUploadedFile("h.csv", f"headset_id\n{rows}".encode())
    assert api.post("/api/studies/alpha/headsets/import/", {"csv_file": upload}, format="multipart").status_code == 201
    first = api.get("/api/studies/alpha/headsets/").json()
    assert first["count"] == 53 and first["count_exact"] and first["previous"] is None
    assert [h["headset_id"] for h in first["results"]] == [f"HS-{n:03d}" for n in range(50)]
    second = api.get(first["next"]).json()
    assert [h["headset_id"] for h in second["results"]] == ["HS-050", "HS-051", "HS-052"]
    assert second["next"] is None and api.get(second["previous"]).json()["results"] == first["results"]
    refused = api.get("/api/studies/alpha/headsets/?cursor=not-a-position")
    assert refused.status_code == 400 and "start again from the first page" in refused.json()["cursor"]


def test_consent_flow_through_the_api(api, study, headset, ethics, storage_dir):
    demonstrator = api.post("/api/studies/alpha/demonstrators/", {"headset": "HS-0001"}, format="json").json()
    upload = SimpleUploadedFile("icf.txt", b"I agree.")
    document = api.post("/api/studies/alpha/consent-documents/", {"identifier": "ICF-1", "version": "1",
                                                                  "issued_on": "2026-01-01", "file": upload},
                        format="multipart").json()
    assert document["accepted_at"] is None and len(document["sha256"]) == 64
    given = api.post("/api/studies/alpha/consent-events/", {
        "demonstrator": demonstrator["designator"], "kind": "given", "document": document["id"],
        "event_date": "2026-02-01", "scopes": ["episode_release"]}, format="json")
    assert given.status_code == 201, given.json()
    coverage_url = (f"/api/studies/alpha/demonstrators/{demonstrator['id']}/coverage/"
                    "?scope=episode_release&date=2026-03-01")
    assert api.get(coverage_url).json()["covered"] is False
    assert api.post(f"/api/studies/alpha/consent-documents/{document['id']}/accept/").status_code == 403
    ethics_api = APIClient()
    ethics_api.force_authenticate(ethics)
    assert ethics_api.post(f"/api/studies/alpha/consent-documents/{document['id']}/accept/").status_code == 200
    assert api.get(coverage_url).json() == {"covered": True, "reason": "consent of 2026-02-01 to ICF-1 v1",
                                            "event": given.json()["id"], "document": "ICF-1 v1"}
    early = api.post("/api/studies/alpha/consent-events/", {
        "demonstrator": demonstrator["designator"], "kind": "withdrawn", "event_date": "2026-01-15",
        "reason": "asked"}, format="json")
    assert early.status_code == 400 and "before the consent given on 2026-02-01" in early.json()["detail"]
    api.post("/api/studies/alpha/consent-events/", {"demonstrator": demonstrator["designator"],
                                                    "kind": "withdrawn", "event_date": "2026-04-01",
                                                    "reason": "asked"}, format="json")
    assert api.get(coverage_url).json()["reason"] == "consent withdrawn on 2026-04-01"
    events = api.get(f"/api/studies/alpha/consent-events/?demonstrator={demonstrator['designator']}&kind=withdrawn")
    assert [e["kind"] for e in events.json()["results"]] == ["withdrawn"]
    assert AuditEvent.objects.filter(action__startswith="consent.").count() == 2


def test_consent_events_cannot_be_changed_through_the_api(api, study, demonstrator, accepted_document, coordinator):
    from datetime import date

    from portal.studies.services.consent import give_consent

    event = give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 2, 1),
                         scopes=["episode_release"])
    url = f"/api/studies/alpha/consent-events/{event.pk}/"
    assert api.patch(url, {"reason": "x"}, format="json").status_code == 405
    assert api.delete(url).status_code == 405


def test_schema_describes_the_registry(api):
    schema = api.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert "/api/studies/{study_code}/headsets/" in paths
    assert "/api/studies/{study_code}/consent-events/" in paths
    parameters = {p["name"] for p in paths["/api/studies/{study_code}/headsets/"]["get"]["parameters"]}
    assert {"study_code", "cursor", "retired", "headset_id"} <= parameters
