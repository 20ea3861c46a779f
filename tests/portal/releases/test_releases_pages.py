"""Release pages beyond permissions: a request made from the filters, the video served with HTTP Range, the
ethics officers' queue, decisions asked for confirmation, a requester's withdrawal shown as such."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages
from django.urls import reverse
from django_scopes import scope

from portal.releases.models import ReleaseRequest
from portal.releases.services import review

pytestmark = pytest.mark.django_db


def test_a_coordinator_asks_for_every_episode_matching_the_filters(team, verified, client):
    episodes = verified(3)
    task = episodes[0].recording.summary["tasks"][0]
    matching = [e.episode_index for e in episodes if task in e.recording.summary["tasks"]]
    client.force_login(team.reg.coordinator)
    url = reverse("release-new", args=[team.study.code])
    page = client.get(url, {"task": task, "state": "unrequested"})
    assert page.status_code == 200 and page.content.decode().count('name="episodes"') == len(matching)
    made = client.post(url, {"task": task, "state": "unrequested", "all_matching": "1", "purpose": "benchmark"})
    assert made.status_code == 302
    with scope(study=team.study):
        request = ReleaseRequest.objects.get()
        assert sorted(request.items.values_list("episode_index", flat=True)) == matching
    again = client.get(url, {"state": "unrequested"})
    assert again.content.decode().count('name="episodes"') == 3 - len(matching)


def test_a_refused_request_shows_its_error_above_the_episodes_where_the_eye_is(team, client):
    client.force_login(team.reg.coordinator)
    url = reverse("release-new", args=[team.study.code])
    page = client.post(url, {"all_matching": "0", "purpose": "benchmark"})
    assert page.status_code == 400
    html = page.content.decode()
    summary = html.find('id="form-errors"')
    assert summary != -1 and "Choose at least one episode to release" in html[summary:html.find('id="candidates"')]
    with scope(study=team.study):
        assert not ReleaseRequest.objects.exists()


def test_the_video_is_served_with_http_range(team, verified, make_request, client):
    episode = verified(1)[0]
    request = make_request([episode])
    with scope(study=team.study):
        item = request.items.get()
    name = episode.prefix + review.video_path(item)
    stored = storages["shards"].open(name, "rb").read()
    client.force_login(team.reg.ethics)
    url = reverse("release-episode-video", args=[team.study.code, request.number, episode.episode_index])
    whole = client.get(url)
    assert (whole.status_code, whole["Accept-Ranges"], b"".join(whole.streaming_content)) == (200, "bytes", stored)
    part = client.get(url, headers={"range": "bytes=100-199"})
    assert part.status_code == 206 and part["Content-Range"] == f"bytes 100-199/{len(stored)}"
    assert b"".join(part.streaming_content) == stored[100:200]
    tail = client.get(url, headers={"range": "bytes=-10"})
    assert b"".join(tail.streaming_content) == stored[-10:]
    assert client.get(url, headers={"range": f"bytes={len(stored) + 5}-"}).status_code == 416


def test_the_ethics_officers_queue_and_the_coordinators_requests(team, verified, make_request, client):
    request = make_request(verified(1))
    client.force_login(team.reg.ethics)
    dashboard = client.get("/").content.decode()
    assert "Release requests awaiting your approval" in dashboard
    listing = client.get(reverse("release-list", args=[team.study.code]), {"state": "awaiting_approval"})
    assert request.release_id in listing.content.decode() and "awaits you" in listing.content.decode()
    client.force_login(team.reg.coordinator)
    assert "Your requests awaiting approval" in client.get("/").content.decode()


def test_approve_reject_and_withdraw_ask_for_confirmation_first(team, verified, make_request, client):
    """The forms carry the question that the portal's confirm.js asks (tests/e2e/test_confirm.py shows it asked)."""
    request = make_request(verified(1))
    url = reverse("release-detail", args=[team.study.code, request.number])
    client.force_login(team.reg.ethics)
    officer = client.get(url).content.decode()
    assert ('id="approve-form" class="decision" data-confirm="Approve release-0001? Your approval is recorded and '
            'cannot be taken back.">') in officer
    assert 'id="reject-form" class="decision" data-confirm="Reject release-0001? It cannot be approved afterwards.">' \
        in officer
    client.force_login(team.reg.coordinator)
    requester = client.get(url).content.decode()
    assert ('id="reject-form" class="decision" data-confirm="Withdraw your request release-0001? It cannot be '
            'submitted again.">') in requester


def test_a_requester_withdrawing_is_shown_as_withdrawn_and_a_coordinator_is_not_called_an_officer(team, verified,
                                                                                                   make_request,
                                                                                                   client):
    from portal.releases.services.release_requests import reject

    request = make_request(verified(1))
    url = reverse("release-detail", args=[team.study.code, request.number])
    client.force_login(team.reg.coordinator)  # the requester, a coordinator only
    waiting = client.get(url).content.decode()
    assert "other ethics officers" not in waiting
    assert "The study's ethics officers approve it: 2 of them, none of them you." in waiting
    with scope(study=team.study):
        reject(team.reg.coordinator, request, reason="asked for the wrong episodes")
    page = client.get(url).content.decode()
    assert "<strong>Withdrawn by the requester" in page and ">Rejected<" not in page
    listed = client.get(reverse("release-list", args=[team.study.code])).content.decode()
    assert 'data-state="rejected">Withdrawn by the requester</span>' in listed
    # An ethics officer's rejection is still a rejection.
    other = make_request(verified(1))
    with scope(study=team.study):
        reject(team.reg.ethics, other, reason="not covered by the purpose")
    listed = client.get(reverse("release-list", args=[team.study.code])).content.decode()
    assert 'data-state="rejected">Rejected</span>' in listed


def test_a_release_being_made_shows_what_its_job_is_doing_on_the_page_and_in_its_status(team, verified,
                                                                                        make_request, client):
    from portal.releases.models import Release
    from portal.releases.services import publish
    from portal.releases.services.approval import approve

    request = make_request(verified(1))
    with scope(study=team.study):
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
        assert publish.claim_release(request.pk).state == ReleaseRequest.State.RELEASING
        note = "redacting <episode-000000> (1 of 1): frame 7 of 30"
        Release.objects.filter(request=request).update(progress_note=note)
    client.force_login(team.reg.coordinator)
    page = client.get(reverse("release-detail", args=[team.study.code, request.number])).content.decode()
    assert ('<p id="progress-note">Redacting &lt;episode-000000&gt; (1 of 1): frame 7 of 30</p>' in page)
    status = client.get(reverse("release-status", args=[team.study.code, request.number])).json()
    assert status["progress_note"] == note
    with scope(study=team.study):
        Release.objects.filter(request=request).update(progress_note="")
    page = client.get(reverse("release-detail", args=[team.study.code, request.number])).content.decode()
    assert '<p id="progress-note" hidden></p>' in page
