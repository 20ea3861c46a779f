"""Recording pages: upload streamed to storage, filters, detail, re-check, a demonstrator registered from the
quarantine page, what an exported recording says it runs now."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path
from tests.portal.recordings.conftest import run_ingest, zipped

pytestmark = pytest.mark.django_db


def test_upload_page_streams_to_storage_then_ingests(client, reg, make_capture, sent_tasks, stored_objects,
                                                     django_capture_on_commit_callbacks):
    client.force_login(reg.coordinator)
    archive = zipped(make_capture(reg.claims()))
    with open(archive, "rb") as stream, django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("recording-upload", args=[reg.study.code]), {"source": stream},
                               headers={"accept": "application/json"})
    assert response.status_code == 201
    assert [name for name, _ in sent_tasks] == ["recordings.ingest_recording"]
    with scope(study=reg.study):
        recording = Recording.objects.get()
    assert response.json()["url"].endswith(f"/{recording.uid}/")
    assert stored_objects("captures", reg.study.code) == [recording.prefix + "incoming/" + recording.original_name]
    run_ingest(reg)
    recording.refresh_from_db()
    assert recording.state == Recording.State.QUEUED and recording.incoming_name == ""
    assert not any("/incoming/" in name for name in stored_objects("captures", reg.study.code))
    page = client.get(reverse("recording-detail", args=[reg.study.code, recording.uid]))
    assert page.status_code == 200 and b"Queued for export" in page.content
    status = client.get(reverse("recording-status", args=[reg.study.code, recording.uid])).json()
    assert status["state"] == "queued"


def test_list_filters_and_quarantine_recheck_page(client, reg, make_capture):
    with scope(study=reg.study):
        good = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims()))
        bad = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(headset_id="HS-09")))
    client.force_login(reg.coordinator)
    url = reverse("recording-list", args=[reg.study.code])
    everything = client.get(url).content.decode()
    assert str(good.uid) in everything and str(bad.uid) in everything
    quarantined = client.get(url, {"state": "quarantined"}).content.decode()
    assert str(bad.uid) in quarantined and str(good.uid) not in quarantined
    by_headset = client.get(url, {"headset": reg.headset.headset_id}).content.decode()
    assert str(good.uid) in by_headset and str(bad.uid) not in by_headset
    later = client.get(url, {"recorded_from": "2999-01-01"}).content.decode()
    assert str(good.uid) not in later
    detail = client.get(reverse("recording-detail", args=[reg.study.code, bad.uid])).content.decode()
    assert "headset &#x27;HS-09&#x27; is not registered" in detail
    response = client.post(reverse("recording-recheck", args=[reg.study.code, bad.uid]), follow=True)
    assert b"Still quarantined" in response.content


def test_quarantine_page_registers_the_demonstrator_a_blank_designator_needs(client, reg, make_capture):
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(demonstrator_id="")))
    client.force_login(reg.coordinator)
    detail = reverse("recording-detail", args=[reg.study.code, recording.uid])
    assert "Register a demonstrator with a generated designator" in client.get(detail).content.decode()
    response = client.post(reverse("recording-register-demonstrator", args=[reg.study.code, recording.uid]),
                           follow=True)
    recording.refresh_from_db()
    assert recording.demonstrator is not None
    assert f"Demonstrator {recording.demonstrator} registered for this recording" in response.content.decode()
    assert "Register a demonstrator" not in response.content.decode()
    api = client.post(f"/api/studies/{reg.study.code}/recordings/{recording.uid}/register-demonstrator/")
    assert api.status_code == 400 and "already has demonstrator" in api.json()["detail"]


def test_an_exported_recording_says_what_runs_now_not_exported_twice(client, reg, make_capture):
    from portal.recordings.services.export import export_recording

    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), seconds=1.0, width=32,
                                                                          height=24))
        export_recording(recording.pk)
        recording.refresh_from_db()
    assert recording.state == Recording.State.EXPORTED  # the receipt check has not run yet
    client.force_login(reg.coordinator)
    status = client.get(reverse("recording-status", args=[reg.study.code, recording.uid])).json()
    assert (status["label"], status["note"]) == ("Exported", "checking the stored shard against its receipt")
    page = client.get(reverse("recording-detail", args=[reg.study.code, recording.uid])).content.decode()
    assert '<p id="progress-label" class="empty">checking the stored shard against its receipt</p>' in page
