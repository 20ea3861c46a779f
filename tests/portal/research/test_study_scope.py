"""A researcher granted in one study sees that study's released data only, with published releases in two studies
whose release numbers and episode indexes overlap and differ: the browse page and the released-episodes API list
this study's episodes only, the other study's release and episode numbers in the viewer's URLs answer 404, and a
dataset mixing the two studies is refused (through the API and the page) with nothing made.

The catalogue reads through the study-scoped managers; an unscoped one there (a query that forgot the study) is
what these tests catch."""

from __future__ import annotations

import dataclasses

import pytest
from django.urls import reverse
from django_scopes import scope, scopes_disabled

from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, publish, release_requests
from portal.releases.services.approval import approve
from portal.research.models import Dataset

pytestmark = pytest.mark.django_db


def publish_in(registry, episodes) -> ReleaseRequest:
    """A release of ``episodes`` in the registry's study (one approval needed there), published."""
    with scope(study=registry.study):
        request = release_requests.create_request(registry.coordinator, registry.study, episodes=episodes,
                                                  purpose="policy training")
        gate.inspect_request(request)
        release_requests.submit(registry.coordinator, request)
        request.refresh_from_db()
        approve(registry.ethics, request, manifest_sha256=request.manifest_sha256)
        publish.publish_release(request.pk)
        request = ReleaseRequest.objects.get(pk=request.pk)
    assert request.state == ReleaseRequest.State.RELEASED
    return request


@pytest.fixture
def two_studies(reg, make_registry, verified_factory, make_released, researcher):
    """This study: release-0001 of episodes 0 and 1. The other study: release-0001 of its episode 0 and
    release-0002 of its episodes 1, 2 and 3, so its release 2 and episodes 2 and 3 have no match here. The
    researcher holds a grant in this study only."""
    here = make_released([verified_factory(reg) for _ in range(2)])
    other_reg = make_registry(code=f"{reg.study.code}x", approvals_required=1)
    there_episodes = [verified_factory(other_reg) for _ in range(4)]
    there = [publish_in(other_reg, there_episodes[:1]), publish_in(other_reg, there_episodes[1:])]
    with scopes_disabled():
        mine = {(here.number, i) for i in here.items.values_list("episode_index", flat=True)}
        theirs = {(r.number, i) for r in there for i in r.items.values_list("episode_index", flat=True)}
        their_captures = {e.recording.capture_id for e in there_episodes}
    assert mine == {(1, 0), (1, 1)} and theirs == {(1, 0), (2, 1), (2, 2), (2, 3)}
    return dataclasses.make_dataclass("TwoStudies", ["study", "other", "mine", "their_captures", "researcher"])(
        reg.study, other_reg.study, mine, their_captures, researcher)


def test_the_browse_page_and_the_api_list_only_this_studys_episodes(client, two_studies):
    world = two_studies
    client.force_login(world.researcher)
    page = client.get(reverse("research-browse", args=[world.study.code])).content.decode()
    assert page.count('name="items"') == len(world.mine) == 2
    assert all(f'value="{n}:{i}"' in page for n, i in world.mine)
    assert 'value="2:' not in page and not [capture for capture in world.their_captures if capture in page]

    listed = client.get(f"/api/studies/{world.study.code}/released-episodes/").json()
    assert {(row["release"], row["episode_index"]) for row in listed["results"]} == world.mine
    assert not {row["episode_id"] for row in listed["results"]} & world.their_captures
    releases = client.get(f"/api/studies/{world.study.code}/releases/").json()
    assert [row["release_id"] for row in releases["results"]] == ["release-0001"]
    # The release filter offers this study's releases only.
    assert client.get(f"/api/studies/{world.study.code}/released-episodes/?release=2").status_code == 400


# Each (URL name, release number, episode index) is asked of one fixture: building the two studies' published
# releases is most of these tests' time, so the URLs share it rather than rebuilding it for each.
OTHER_STUDYS_NUMBERS = [
    ("research-release", 2, None),
    ("research-episode", 2, 2), ("research-episode-data", 2, 2), ("research-episode-video", 2, 2),
    ("research-episode", 2, 3), ("research-episode", 1, 3),
]


def test_the_other_studys_numbers_in_the_viewer_urls_are_not_found(client, two_studies):
    world = two_studies
    client.force_login(world.researcher)
    answers = {}
    for name, number, index in OTHER_STUDYS_NUMBERS:
        args = [world.study.code, number] + ([] if index is None else [index])
        answers[(name, number, index)] = client.get(reverse(name, args=args)).status_code
    assert answers == dict.fromkeys(answers, 404)
    assert client.post(reverse("research-release-links", args=[world.study.code, 2])).status_code == 404


def test_a_dataset_mixing_the_two_studies_is_refused(client, two_studies):
    world = two_studies
    client.force_login(world.researcher)
    mixed = {"episodes": [{"release": 1, "episode_index": 0}, {"release": 2, "episode_index": 2}]}
    answer = client.post(f"/api/studies/{world.study.code}/datasets/", mixed, content_type="application/json")
    assert answer.status_code == 400
    assert "release 2 episode 2" in str(answer.json()["episodes"])

    url = reverse("research-datasets", args=[world.study.code])
    refused = client.post(url, {"items": ["1:0", "2:2"]}, follow=True)
    assert refused.redirect_chain[-1][0].startswith(reverse("research-browse", args=[world.study.code]))
    assert "release 2 episode 2" in refused.content.decode()
    with scopes_disabled():
        assert not Dataset.objects.exists()
