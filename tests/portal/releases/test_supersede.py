"""Supersede (services/supersede.py): after a withdrawal, the release that held the withdrawn episodes is followed
by one without them; its manifest names the release it supersedes and the withdrawal, it verifies, and its
one-dataset download loads in LeRobot without the episodes. It asks for fresh approvals when the study says so,
and otherwise carries the superseded release's approvals, each as the officer gave it, and is queued at once."""

from __future__ import annotations

import json

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.release import verify_release
from portal.core import storage
from portal.releases.models import Approval, ReleaseRequest
from portal.releases.services import gate, publish
from portal.releases.services.approval import approve
from portal.releases.services.manifest import public_key
from portal.research.services import datasets, links
from portal.studies.services.study import set_carry_over_approvals
from tests.portal.research import conftest as research
from tests.portal.research.conftest import item, run, withdraw
from tests.portal.research.lerobot_kept import keep_for_lerobot
from tests.portal.research.linkfetch import fetch

pytestmark = pytest.mark.django_db
RELEASE = ReleaseRequest.State
# A withdrawal's world and what it needs, from the research fixtures.
agreement, make_released, make_researcher, second, world = (research.agreement, research.make_released,
                                                            research.make_researcher, research.second, research.world)


def test_the_superseding_release_verifies_and_its_dataset_loads_without_the_episodes(
        reg, team, world, django_capture_on_commit_callbacks, sent_tasks, client, tmp_path, test_output):
    with scope(study=reg.study):  # the study asks for fresh approval of a superseding release
        set_carry_over_approvals(reg.coordinator, reg.study, False)
    withdrawal = run(withdraw(reg, django_capture_on_commit_callbacks, sent_tasks))
    with scope(study=reg.study):
        successor = ReleaseRequest.objects.get(supersedes=world.first)
        gate.inspect_request(successor)
        for officer in (reg.ethics, team.ethics2):
            approve(officer, successor, manifest_sha256=successor.manifest_sha256)
        publish.publish_release(successor.pk)
        successor.refresh_from_db()
    assert successor.state == RELEASE.RELEASED
    folder = tmp_path / "release"
    for name in storage.walk(storages["releases"], successor.prefix):
        storage.fetch(storages["releases"], name, folder / name[len(successor.prefix):])
    manifest = verify_release(folder, public_key())
    assert manifest["release"]["supersedes"] == {"release_id": "release-0001", "number": 1,
                                                 "manifest_sha256": world.first.manifest_sha256}
    assert manifest["release"]["withdrawal"] == withdrawal.pk and "carried_approvals" not in manifest["release"]
    assert [e["episode_index"] for e in manifest["release"]["episodes"]] == [1]

    researcher = world.researchers["r2"]
    chosen = [item(successor, 1)]
    with scope(study=reg.study):
        dataset, _ = datasets.request_dataset(researcher, reg.study, chosen)
        datasets.build_dataset(dataset.pk)
        dataset.refresh_from_db()
        pulled = tmp_path / "dataset"
        for link in links.dataset_links(researcher, dataset, via="api"):
            status, body = fetch(client, link.url)
            assert status == 200
            (pulled / link.path).parent.mkdir(parents=True, exist_ok=True)
            (pulled / link.path).write_bytes(body)
    assert json.loads((pulled / "meta/info.json").read_text())["total_episodes"] == 1
    keep_for_lerobot(test_output, "portal-dataset-after-withdrawal", pulled, chosen, folder)


def test_with_carry_over_the_superseding_release_keeps_its_approvals_and_is_queued(
        reg, world, django_capture_on_commit_callbacks, sent_tasks):
    assert reg.study.carry_over_approvals  # the default
    withdrawal = withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)
    with django_capture_on_commit_callbacks(execute=True):
        run(withdrawal)
    with scope(study=reg.study):
        successor = ReleaseRequest.objects.get(supersedes=world.first)
        carried = list(Approval.objects.filter(request=successor).order_by("pk"))
        originals = list(Approval.objects.filter(request=world.first).order_by("pk"))
    assert successor.state == RELEASE.APPROVED
    assert [a.carried_over_from_id for a in carried] == [a.pk for a in originals]
    # each as the officer gave it: the digest they approved (the superseded release's) and their time
    assert [(a.officer_id, a.manifest_sha256, a.approved_at) for a in carried] == [
        (a.officer_id, world.first.manifest_sha256, a.approved_at) for a in originals]
    assert ("releases.publish_release", (successor.pk,)) in sent_tasks
