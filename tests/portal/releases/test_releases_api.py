"""The release requests' API: asking, listing, the gate; the schema describes every endpoint."""

from __future__ import annotations

import pytest

from portal.releases.models import ReleaseRequest

pytestmark = pytest.mark.django_db


def test_the_api_asks_lists_and_shows_the_gate(team, verified, client):
    episode = verified(1)[0]
    client.force_login(team.reg.coordinator)
    base = f"/api/studies/{team.study.code}/release-requests/"
    made = client.post(base, {"episodes": [episode.episode_index], "purpose": "via the API"},
                       content_type="application/json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["state"] == "draft" and body["release_id"] == "release-0001"
    assert [c["status"] for c in body["gate"][0]["checks"]].count("pending") == 2
    refused = client.post(base, {"episodes": [99], "purpose": "x"}, content_type="application/json")
    assert refused.status_code == 400 and "99" in str(refused.json())
    assert client.get(base, {"state": "draft"}).json()["count"] == 1
    assert client.get(base, {"state": "released"}).json()["count"] == 0
    assert client.get(base, {"state": "nonsense"}).status_code == 400


def test_the_schema_describes_every_release_endpoint():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    base = "/api/studies/{study_code}/release-requests/"
    paths = schema["paths"]
    assert {base, f"{base}{{number}}/", *(f"{base}{{number}}/{name}/" for name in
            ("submit", "approve", "reject", "reverify", "retry"))} <= set(paths)
    assert f"{base}{{number}}/episodes/{{episode_index}}/review/" in paths
    approve_body = schema["components"]["schemas"]["Approve"]["properties"]
    assert {"manifest_sha256", "otp_code"} <= set(approve_body)
    states = {p["name"]: p for p in paths[base]["get"]["parameters"]}["state"]["schema"]["enum"]
    assert set(states) == set(ReleaseRequest.State.values)
