"""The ethics officer's dashboard after a withdrawal: a release published and then superseded still counts as
published (and says so), a tile shows the withdrawals and their reach, and the superseding release says the
withdrawal made it rather than naming a requester."""

from __future__ import annotations

import html
import re

import pytest
from django_scopes import scope

from portal.releases.models import ReleaseRequest
from portal.releases.services import publish
from tests.portal.research.conftest import run, withdraw

pytestmark = pytest.mark.django_db

TILE = re.compile(r'<span class="label">(?:<a href="[^"]*">)?(?P<label>[^<]*)(?:</a>)?</span>\s*'
                  r'<span class="count">(?P<count>\d+)</span>')


def tiles(client, role: str) -> dict[str, int]:
    page = client.get("/").content.decode()
    panel = page.split(f'data-role="{role}"', 1)[1].split("</article>", 1)[0]
    return {html.unescape(m["label"]): int(m["count"]) for m in TILE.finditer(panel)}


def test_the_dashboard_counts_superseded_releases_and_shows_the_withdrawals_and_their_reach(
        reg, second, verified_factory, make_released, make_researcher, client, django_capture_on_commit_callbacks,
        sent_tasks):
    first = make_released([verified_factory(reg), verified_factory(second)])  # episode 0 withdraws, 1 stays
    client.force_login(reg.ethics)
    assert tiles(client, "ethics_officer")["Releases published"] == 1
    assert tiles(client, "ethics_officer")["Consent withdrawals"] == 0

    withdrawal = withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)
    with django_capture_on_commit_callbacks(execute=True):
        withdrawal = run(withdrawal)
    with scope(study=reg.study):
        successor = ReleaseRequest.objects.get(supersedes=first)
    shown = tiles(client, "ethics_officer")
    assert shown["Releases published (1 since superseded after a withdrawal)"] == 1
    assert shown["Consent withdrawals (reach: 1 episode(s), 1 release(s) superseded, 0 one-dataset download(s) "
                 "removed, 0 researcher(s) who had downloaded them)"] == 1

    with scope(study=reg.study):
        publish.publish_release(successor.pk)
    assert tiles(client, "ethics_officer")["Releases published (1 since superseded after a withdrawal)"] == 2
    client.force_login(reg.coordinator)
    assert tiles(client, "coordinator")["Consent withdrawals (reach: 1 episode(s), 1 release(s) superseded, "
                                        "0 one-dataset download(s) removed, 0 researcher(s) who had downloaded "
                                        "them)"] == 1

    client.force_login(reg.ethics)
    detail = client.get(f"/studies/{reg.study.code}/releases/{successor.number}/").content.decode()
    made_by = detail.split('id="made-by"', 1)[1].split("</p>", 1)[0]
    assert f'href="/studies/{reg.study.code}/withdrawals/{withdrawal.pk}/">withdrawal {withdrawal.pk}</a>' in made_by
    assert "not requested by anyone" in made_by and "carrying its 2 approvals" in made_by
    assert "Requested by" not in detail
    assert detail.count(f'<small class="carried">the manifest of {first.release_id}: carried over</small>') == 2
    listed = client.get(f"/studies/{reg.study.code}/releases/").content.decode()
    row = listed.split(f"{successor.release_id}", 1)[1].split("</tr>", 1)[0]
    assert "by a withdrawal" in row and reg.coordinator.username not in row
    original = client.get(f"/studies/{reg.study.code}/releases/{first.number}/").content.decode()
    assert f"Requested by <strong>{reg.coordinator.username}</strong>" in original


def test_a_superseding_release_made_before_requests_named_their_withdrawal_links_it_from_its_tombstone(
        reg, second, verified_factory, make_released, client, django_capture_on_commit_callbacks, sent_tasks):
    """Releases asks research's registered lookup (``releases.made_by``) rather than importing research."""
    first = make_released([verified_factory(reg), verified_factory(second)])
    withdrawal = withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)
    with django_capture_on_commit_callbacks(execute=True):
        run(withdrawal)
    with scope(study=reg.study):
        successor = ReleaseRequest.objects.get(supersedes=first)
        ReleaseRequest.objects.filter(pk=successor.pk).update(superseding={})  # as one made before it was kept
    client.force_login(reg.ethics)
    detail = client.get(f"/studies/{reg.study.code}/releases/{successor.number}/").content.decode()
    made_by = detail.split('id="made-by"', 1)[1].split("</p>", 1)[0]
    assert f'href="/studies/{reg.study.code}/withdrawals/{withdrawal.pk}/">withdrawal {withdrawal.pk}</a>' in made_by
