"""The recordings API: upload, list with filters, re-check, permissions."""

from __future__ import annotations

import pytest
from django_scopes import scope

from portal.accounts.services import issue_token
from tests.portal.recordings.conftest import run_ingest, zipped

pytestmark = pytest.mark.django_db


def test_api_upload_list_and_recheck(client, reg, make_capture):
    auth = {"authorization": f"Token {issue_token(reg.coordinator, name='tests')[1]}"}
    base = f"/api/studies/{reg.study.code}/recordings/"
    with open(zipped(make_capture(reg.claims(headset_id="HS-05"))), "rb") as stream:
        created = client.post(base, {"source": stream}, headers=auth)
    assert created.status_code == 201, created.content
    run_ingest(reg)
    listed = client.get(base, {"state": "quarantined"}, headers=auth).json()
    assert [r["uid"] for r in listed["results"]] == [created.json()["uid"]]
    assert "HS-05" in listed["results"][0]["reason"]
    with scope(study=reg.study):
        from portal.studies.services.headsets import register_headset

        register_headset(reg.coordinator, reg.study, headset_id="HS-05")
    rechecked = client.post(f"{base}{created.json()['uid']}/recheck/", headers=auth)
    assert rechecked.status_code == 200 and rechecked.json()["state"] == "queued"
    again = client.post(f"{base}{created.json()['uid']}/recheck/", headers=auth)
    assert again.status_code == 400 and "only a quarantined" in again.json()["detail"]
    assert client.get(f"/api/studies/{reg.study.code}/episodes/", headers=auth).json()["count"] == 0
    ethics = issue_token(reg.ethics, name="tests")[1]
    assert client.post(base, {}, headers={"authorization": f"Token {ethics}"}).status_code == 403
