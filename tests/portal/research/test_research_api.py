"""The researcher's journey through the API, from the agreement to links; the schema describes every endpoint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_scopes import scope

from exporter.release import MANIFEST, SIGNATURE
from portal.research.models import Dataset
from portal.research.services import datasets

pytestmark = pytest.mark.django_db


def test_the_api_journey_from_agreement_to_links(client, reg, agreement, released, make_user,
                                                 django_capture_on_commit_callbacks):
    study = reg.study
    user = make_user(f"{study.code}-api")
    client.force_login(user)
    shown = client.get(f"/api/studies/{study.code}/data-use-agreement/").json()
    assert (shown["version"], shown["sha256"], shown["accepted_version"]) == (1, agreement.sha256, None)
    asked = client.post("/api/access-requests/", {"study": study.code, "purpose": "policies", "agreement_version": 1,
                                                  "agreement_sha256": shown["sha256"]}, content_type="application/json")
    assert asked.status_code == 201 and asked.json()["state"] == "pending"
    assert client.get("/api/access-requests/").json()["results"][0]["uid"] == asked.json()["uid"]

    client.force_login(reg.coordinator)
    listed = client.get(f"/api/studies/{study.code}/access-requests/?state=pending").json()
    assert [r["researcher"] for r in listed["results"]] == [user.get_username()]
    until = (timezone.now() + timedelta(days=5)).isoformat()
    granted = client.post(f"/api/studies/{study.code}/access-requests/{asked.json()['uid']}/grant/",
                          {"expires_at": until}, content_type="application/json")
    assert granted.status_code == 200 and granted.json()["state"] == "granted"

    client.force_login(user)
    releases = client.get(f"/api/studies/{study.code}/releases/").json()
    assert [r["release_id"] for r in releases["results"]] == ["release-0001"]
    detail = client.get(f"/api/studies/{study.code}/releases/{released.number}/").json()
    assert detail["paths"][:2] == [MANIFEST, SIGNATURE] and len(detail["paths"]) == detail["files"]
    episodes = client.get(f"/api/studies/{study.code}/released-episodes/?release={released.number}").json()
    assert sorted(e["episode_index"] for e in episodes["results"]) == [0, 1, 2]
    links = client.post(f"/api/studies/{study.code}/releases/{released.number}/links/",
                        {"paths": ["episode-000000/meta/info.json"]}, content_type="application/json").json()
    assert links["links"][0]["url"].startswith("http") and links["links"][0]["path"] == "episode-000000/meta/info.json"

    with django_capture_on_commit_callbacks(execute=True):
        made = client.post(f"/api/studies/{study.code}/datasets/", {"episodes": [
            {"release": released.number, "episode_index": 0}, {"release": released.number, "episode_index": 1}]},
            content_type="application/json")
    assert made.status_code == 201 and made.json()["state"] == "queued"
    wrong = client.post(f"/api/studies/{study.code}/datasets/", {"episodes": [{"release": 9, "episode_index": 0}]},
                        content_type="application/json")
    assert wrong.status_code == 400 and "release 9 episode 0" in wrong.json()["episodes"]
    not_ready = client.post(f"/api/studies/{study.code}/datasets/1/links/", {}, content_type="application/json")
    assert not_ready.status_code == 400 and "not ready" in not_ready.json()["detail"]
    with scope(study=study):
        datasets.build_dataset(Dataset.objects.get().pk)
    again = client.post(f"/api/studies/{study.code}/datasets/", {"episodes": [
        {"release": released.number, "episode_index": 1}, {"release": released.number, "episode_index": 0}]},
        content_type="application/json")
    assert again.status_code == 200 and again.json()["state"] == "ready"  # reused
    all_links = client.post(f"/api/studies/{study.code}/datasets/1/links/", {}, content_type="application/json")
    assert len(all_links.json()["links"]) == again.json()["files_total"]
    issued = client.get(f"/api/studies/{study.code}/links/").json()
    assert issued["count"] == 1 + again.json()["files_total"]


def test_the_schema_describes_every_research_endpoint():
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    for path in ("/api/access-requests/", "/api/access-requests/{uid}/cancel/",
                 "/api/studies/{study_code}/data-use-agreement/",
                 "/api/studies/{study_code}/data-use-agreement/accept/",
                 "/api/studies/{study_code}/access-requests/{uid}/grant/", "/api/studies/{study_code}/releases/",
                 "/api/studies/{study_code}/releases/{number}/links/", "/api/studies/{study_code}/released-episodes/",
                 "/api/studies/{study_code}/datasets/", "/api/studies/{study_code}/datasets/{number}/links/",
                 "/api/studies/{study_code}/links/"):
        assert path in paths, path


def test_released_episodes_are_listed_from_the_columns_they_show(client, reg, released, researcher, settings):
    """Each row carries the release, the episode and its recording as stored, page after page in the keyset's order
    and with no query of its own; the page's query reads only the columns shown (not the items' file lists, the
    requests' purposes or the recordings' source files)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "PAGE_SIZE": 2}
    client.force_login(researcher)
    with CaptureQueriesContext(connection) as queries:
        first = client.get(f"/api/studies/{reg.study.code}/released-episodes/").json()
    with CaptureQueriesContext(connection) as second_queries:
        second = client.get(first["next"]).json()
    assert (len(first["results"]), len(second["results"]), second["next"]) == (2, 1, None)
    assert len(second_queries.captured_queries) == len(queries.captured_queries)  # no query a row
    listed = first["results"] + second["results"]
    assert [row["episode_index"] for row in listed] == [2, 1, 0]
    with scope(study=reg.study):
        items = {i.episode_index: i for i in released.items.select_related("episode__recording__demonstrator")}
    assert sorted(row["episode_index"] for row in listed) == sorted(items) == [0, 1, 2]
    for row in listed:
        item = items[row["episode_index"]]
        recording = item.episode.recording
        assert row == {
            "release": released.number, "release_id": released.release_id, "episode_index": item.episode_index,
            "episode_id": recording.capture_id, "recorded_at": row["recorded_at"], "length": item.episode.length,
            "designator": recording.demonstrator.designator, "receipt_sha256": item.receipt_sha256,
        }
        assert row["recorded_at"] and row["recorded_at"][:19] == recording.recorded_at.isoformat()[:19]
    page = next(q["sql"] for q in queries.captured_queries if 'FROM "releases_releaseitem"' in q["sql"]
                and '"releases_releaseitem"."receipt_sha256"' in q["sql"])
    for unused in ('"releases_releaseitem"."files"', '"releases_releaserequest"."purpose"',
                   '"recordings_recording"."source_files"'):
        assert unused not in page
