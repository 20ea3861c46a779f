"""The researcher's journey through the pages, and the stewards' decisions: each step calls the service and
shows its outcome."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.storage import storages
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from exporter.release import DATASET_MANIFEST, MANIFEST, manifest_files
from portal.access.models import Role, RoleGrant
from portal.audit.models import AuditEvent
from portal.research.models import AccessRequest, Dataset, IssuedLink
from portal.research.services import datasets
from tests.portal.research.linkfetch import fetch

pytestmark = pytest.mark.django_db


def test_a_researcher_asks_is_granted_browses_views_and_downloads_through_the_pages(
        client, reg, agreement, released, make_user, django_capture_on_commit_callbacks):
    study = reg.study
    user = make_user(f"{study.code}-newcomer")
    client.force_login(user)
    home = client.get(reverse("research-home")).content.decode()
    assert reverse("research-ask", args=[study.code]) in home

    ask = client.get(reverse("research-ask", args=[study.code])).content.decode()
    assert agreement.text in ask and agreement.sha256 in ask
    refused = client.post(reverse("research-ask", args=[study.code]),
                          {"purpose": "grasping", "version": 1, "sha256": agreement.sha256})
    assert refused.status_code == 400  # the agreement was not accepted: nothing asked
    assert not AccessRequest.objects.filter(researcher=user).exists()
    asked = client.post(reverse("research-ask", args=[study.code]),
                        {"purpose": "grasping", "version": 1, "sha256": agreement.sha256, "accept": "on"})
    assert asked.status_code == 302 and asked["Location"] == reverse("research-home")
    request = AccessRequest.objects.get(researcher=user)
    assert client.get(reverse("research-browse", args=[study.code])).status_code == 403  # not granted yet

    client.force_login(reg.coordinator)
    listed = client.get(reverse("research-access-requests", args=[study.code]) + "?state=pending").content.decode()
    assert user.get_username() in listed and "grasping" in listed
    suggested = timezone.localdate() + timedelta(days=180)  # the date picker is filled in (ISO, as it reads)
    assert f'type="date" name="until" value="{suggested.isoformat()}"' in listed
    until = timezone.localdate() + timedelta(days=20)
    client.post(reverse("research-access-grant", args=[study.code, request.uid]), {"until": until.isoformat()})
    grant = RoleGrant.objects.get(user=user, study=study, role=Role.RESEARCHER)
    assert timezone.localdate(grant.expires_at) == until

    client.force_login(user)
    browse = client.get(reverse("research-browse", args=[study.code])).content.decode()
    assert browse.count('name="items"') == 3 and "Showing 3 of 3" in browse
    page = client.get(reverse("research-release", args=[study.code, released.number])).content.decode()
    assert (f"ceres-pull --portal http://testserver --token $CERES_TOKEN --release {study.code}/release-0001 "
            f"{study.code}-release-0001") in page
    assert page.count('name="path"') == released.release.objects_total
    # The count ceres-pull gives as verified (the manifest's files) and the two that are not in it.
    with scope(study=study):
        listed = len(manifest_files(json.loads(storages["releases"].open(released.prefix + MANIFEST).read())))
    assert (f"{released.release.objects_total}: {listed} files (the episodes', the dataset card, "
            "<code>croissant.json</code> and <code>CITATION.cff</code>), each checked against the signed manifest") \
        in page and "plus the manifest and its signature" in page

    viewer = client.get(reverse("research-episode", args=[study.code, released.number, 1])).content.decode()
    assert 'id="viewer"' in viewer and "review.json" in viewer and "video.mp4" in viewer
    assert "{#" not in viewer and "{%" not in viewer  # no template comment or tag shown as text
    assert str(reg.headset.headset_id) not in viewer  # researchers see the designator, not the headset
    data = client.get(reverse("research-episode-data", args=[study.code, released.number, 1])).json()
    assert data["episode"] == "episode-000001" and data["length"] > 0
    assert all(len(data["frames"]) == len(values) for values in data["pinch"].values())
    video = client.get(reverse("research-episode-video", args=[study.code, released.number, 1]),
                       headers={"range": "bytes=0-99"})
    assert video.status_code == 206 and len(b"".join(video.streaming_content)) == 100
    later = client.get(reverse("research-episode-video", args=[study.code, released.number, 1]),
                       headers={"range": "bytes=100-199"})
    assert later.status_code == 206
    # Opening the viewer is logged like a download: its data, and its video from the first byte (not each Range).
    viewed = AuditEvent.objects.filter(action="research.episode_viewed", actor_id=user.pk)
    assert sorted(event.after["part"] for event in viewed) == ["data", "video"]
    assert {event.after["episode"] for event in viewed} == {"episode-000001"}

    got = client.post(reverse("research-release-file", args=[study.code, released.number]),
                      {"path": "episode-000001/meta/info.json"})
    assert got.status_code == 302
    status, body = fetch(client, got["Location"])
    assert status == 200 and b'"codebase_version"' in body
    manifest_links = client.post(reverse("research-release-links", args=[study.code, released.number])).json()
    assert len(manifest_links["links"]) == released.release.objects_total
    with scope(study=study):
        assert IssuedLink.objects.filter(user=user, via="page").count() == 1 + released.release.objects_total

    with django_capture_on_commit_callbacks(execute=True):
        made = client.post(reverse("research-datasets", args=[study.code]),
                           {"items": [f"{released.number}:0", f"{released.number}:2"], "all_matching": "0"})
    with scope(study=study):
        dataset = Dataset.objects.get()
    assert made["Location"] == reverse("research-dataset", args=[study.code, dataset.number])
    building = client.get(made["Location"]).content.decode()
    assert 'data-status-url' in building and "Queued" in building
    with scope(study=study):
        datasets.build_dataset(dataset.pk)
    ready = client.get(made["Location"]).content.decode()
    assert "Ready" in ready and DATASET_MANIFEST in ready and "data-status-url" not in ready
    status = client.get(reverse("research-dataset-status", args=[study.code, dataset.number])).json()
    assert status["state"] == "ready"
    got = client.post(reverse("research-dataset-file", args=[study.code, dataset.number]),
                      {"path": "meta/info.json"})
    assert fetch(client, got["Location"])[1].count(b'"total_episodes": 2') == 1

    mine = client.get(reverse("research-home")).content.decode()
    assert "dataset-0001" in mine and "episode-000001/meta/info.json" in mine


def test_a_steward_refuses_and_revokes_with_a_reason(client, reg, researcher, make_researcher):
    waiting = AccessRequest.objects.get(researcher=make_researcher("waiting", granted=False))
    client.force_login(reg.ethics)
    client.post(reverse("research-access-refuse", args=[reg.study.code, waiting.uid]), {"reason": ""})
    assert AccessRequest.objects.get(pk=waiting.pk).state == "pending"  # refused without a reason: nothing
    client.post(reverse("research-access-refuse", args=[reg.study.code, waiting.uid]), {"reason": "no purpose"})
    assert AccessRequest.objects.get(pk=waiting.pk).state == "refused"
    granted = AccessRequest.objects.get(researcher=researcher)
    client.post(reverse("research-access-revoke", args=[reg.study.code, granted.uid]), {"reason": "project ended"})
    assert AccessRequest.objects.get(pk=granted.pk).state == "revoked"
    assert not RoleGrant.objects.filter(user=researcher, role=Role.RESEARCHER).exists()
