"""After a withdrawal researchers keep every unaffected episode without any new approval: the superseding
release carries the superseded release's approvals (the default), is published at once and its signed manifest
names the release it supersedes, the withdrawal and the approvals it carries (``verify-release`` checks and
prints them); the superseded release serves its unaffected episodes until then, and an old bookmark leads to the
same episode in the new release. What is signed is checked for what it is: a strict subset of what was approved,
with the approvals it names; anything else fails the release visibly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.cli import main as exporter_main
from exporter.release import MANIFEST, ReleaseProblem, verify_release
from exporter.timestamps import rfc3339
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.releases.models import Approval, ReleaseItem, ReleaseRequest
from portal.releases.services import publish
from portal.releases.services.manifest import public_key
from portal.research.exceptions import AccessRefused
from portal.research.models import Dataset
from portal.research.services import datasets, links
from tests.portal.research.conftest import item, run, withdraw
from tests.portal.research.linkfetch import fetch

pytestmark = pytest.mark.django_db
State = ReleaseRequest.State


def stored(name: str) -> bytes:
    with storages["releases"].open(name) as handle:
        return handle.read()


def pull(client, issued, folder: Path) -> Path:
    for link in issued:
        status, body = fetch(client, link.url)
        assert status == 200, link.path
        (folder / link.path).parent.mkdir(parents=True, exist_ok=True)
        (folder / link.path).write_bytes(body)
    return folder


@pytest.fixture
def superseded(reg, world, django_capture_on_commit_callbacks, sent_tasks):
    """release-0001 (episodes 0, 1, 2) after the withdrawal of the demonstrator of 0 and 2, before the release
    job of its successor ran; r2 built a one-dataset download of episode 1 from release-0001 before."""
    assert reg.study.carry_over_approvals  # the default of a new study
    with scope(study=reg.study):
        kept, _ = datasets.request_dataset(world.researchers["r2"], reg.study, [item(world.first, 1)])
        datasets.build_dataset(kept.pk)
    world.datasets = (*world.datasets, kept)
    withdrawal = withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)
    with django_capture_on_commit_callbacks(execute=True):
        withdrawal = run(withdrawal)
    with scope(study=reg.study):
        successor = ReleaseRequest.objects.select_related("study").get(supersedes=world.first)
    return withdrawal, successor


def test_a_researcher_keeps_every_unaffected_episode_without_a_new_approval(
        reg, world, superseded, client, tmp_path, sent_tasks, capsys):
    withdrawal, successor = superseded
    researcher = world.researchers["r2"]
    with scope(study=reg.study):
        originals = list(Approval.objects.filter(request=world.first).order_by("approved_at", "pk"))
        expected = [{"officer": a.officer_name, "approved_at": rfc3339(a.approved_at),
                     "manifest_sha256": world.first.manifest_sha256} for a in originals]
    assert len(originals) == 2
    assert successor.state == State.APPROVED and ("releases.publish_release", (successor.pk,)) in sent_tasks

    # Before the successor's release job ran: the unaffected episode still comes from release-0001 (link and
    # viewer), the withdrawn ones do not.
    path = "episode-000001/meta/info.json"
    with scope(study=reg.study):
        [link] = links.release_links(researcher, world.first, [path], via="api")
        with pytest.raises(AccessRefused):
            links.release_links(researcher, world.first, ["episode-000000/meta/info.json"], via="api")
    status, body = fetch(client, link.url)
    assert status == 200 and body == stored(f"{world.first.prefix}{path}")
    client.force_login(researcher)
    code = reg.study.code
    assert client.get(f"/studies/{code}/released/1/episodes/1/").status_code == 200
    assert client.get(f"/studies/{code}/released/1/episodes/0/").status_code == 404
    page = client.get(f"/studies/{code}/released/1/")
    assert page.status_code == 200 and successor.release_id in page.content.decode()

    # The release job: no officer approved anything since; it signs the successor with the approvals it carries.
    with scope(study=reg.study):
        publish.publish_release(successor.pk)
        successor.refresh_from_db()
        assert successor.state == State.RELEASED, successor.reason
        assert not AuditEvent.objects.filter(action="release.approval_given", target_id=str(successor.pk)).exists()
        issued = links.release_links(researcher, successor, via="api")
    folder = pull(client, issued, tmp_path / "release")
    signed = verify_release(folder, public_key())
    section = signed["release"]
    assert [e["episode_index"] for e in section["episodes"]] == [1]
    assert section["supersedes"] == {"release_id": world.first.release_id, "number": world.first.number,
                                     "manifest_sha256": world.first.manifest_sha256}
    assert section["withdrawal"] == withdrawal.pk
    assert section["carried_approvals"] == expected
    assert [{k: a[k] for k in ("officer", "approved_at", "manifest_sha256")} for a in signed["approvals"]] == expected
    assert {a["carried_over_from"] for a in signed["approvals"]} == {world.first.release_id}

    key = tmp_path / "key.pem"
    key.write_bytes(client.get("/.well-known/ceres-release-key").content)
    capsys.readouterr()
    assert exporter_main(["verify-release", str(folder), "--public-key", str(key)]) == 0
    out = capsys.readouterr().out
    assert (f"supersedes {world.first.release_id} (manifest {world.first.manifest_sha256}), made by withdrawal "
            f"{withdrawal.pk}") in out
    for approval in expected:
        assert (f"carries the approval of {approval['officer']} at {approval['approved_at']} of "
                f"{approval['manifest_sha256']}") in out

    # The one-dataset download of the unaffected episode built from release-0001 is still given out.
    with scope(study=reg.study):
        kept = Dataset.objects.get(pk=world.datasets[-1].pk)
        assert kept.state == Dataset.State.READY
        pull(client, links.dataset_links(researcher, kept, via="api"), tmp_path / "dataset")

    # Old bookmarks lead to the same episode in the new release; the withdrawn episode leads nowhere.
    moved = client.get(f"/studies/{code}/released/1/episodes/1/")
    assert moved.status_code == 302 and moved["Location"] == f"/studies/{code}/released/{successor.number}/episodes/1/"
    assert client.get(moved["Location"]).status_code == 200
    assert client.get(f"/studies/{code}/released/1/episodes/0/").status_code == 404
    assert client.get(f"/studies/{code}/released/1/")["Location"] == f"/studies/{code}/released/{successor.number}/"


def test_a_carried_approval_that_names_another_manifest_does_not_verify(reg, world, superseded, client, tmp_path):
    """``verify-release`` on its own: a carried approval must be one the section names as carried."""
    _, successor = superseded
    with scope(study=reg.study):
        publish.publish_release(successor.pk)
        successor.refresh_from_db()
    folder = tmp_path / "release"
    for name in storage.walk(storages["releases"], successor.prefix):
        storage.fetch(storages["releases"], name, folder / name[len(successor.prefix):])
    manifest = json.loads((folder / MANIFEST).read_bytes())
    manifest["approvals"][0]["manifest_sha256"] = "c" * 64
    from exporter import release as release_format
    from portal.releases.services.manifest import signing_key

    data = release_format.manifest_bytes(release=manifest["release"], approvals=manifest["approvals"],
                                         released_at=manifest["released_at"],
                                         audit_chain_head=manifest["audit_chain_head"])
    (folder / MANIFEST).write_bytes(data)
    (folder / f"{MANIFEST}.sig").write_bytes(release_format.sign(signing_key(), data))
    with pytest.raises(ReleaseProblem, match="the approvals carried over are not the carried_approvals the release"):
        verify_release(folder, public_key())


def _receipt(successor, old):
    ReleaseItem.objects.filter(request=successor).update(receipt_sha256="e" * 64)


def _episode_not_approved(successor, old):
    """An episode the superseded release never held, added by a database writer."""
    extra = ReleaseItem.objects.filter(request=old).exclude(
        episode_index__in=ReleaseItem.objects.filter(request=successor).values("episode_index")).first()
    ReleaseItem.objects.create(study=successor.study, request=successor, episode=extra.episode,
                               episode_index=extra.episode_index + 100, capture_id=extra.capture_id,
                               receipt_sha256=extra.receipt_sha256, files=extra.files)


def _withdrawal(successor, old):
    ReleaseRequest.objects.filter(pk=successor.pk).update(superseding={**successor.superseding, "withdrawal": 10**6})


def _carried(successor, old):
    named = successor.superseding
    carried = [{**named["carried_approvals"][0], "officer": "someone-else"}, *named["carried_approvals"][1:]]
    ReleaseRequest.objects.filter(pk=successor.pk).update(superseding={**named, "carried_approvals": carried})


def _approval_row(successor, old):
    Approval.objects.filter(request=successor).order_by("pk").first().delete()


def _superseded_digest(successor, old):
    named = successor.superseding
    ReleaseRequest.objects.filter(pk=successor.pk).update(superseding={**named, "manifest_sha256": "d" * 64})


CHANGES = {
    "a receipt": (_receipt, "is not the episode release-0001 was approved with"),
    "an episode it never held": (_episode_not_approved, "is not the episode release-0001 was approved with"),
    "the withdrawal": (_withdrawal, "withdrawal 1000000 of the study did not take"),
    "an approval it names as carried": (_carried, "not those of release-0001"),
    "a carried approval removed": (_approval_row, "not exactly the approvals its section names as carried"),
    "the superseded release's digest": (_superseded_digest, "not release-0001 with"),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_a_superseding_release_that_is_not_what_it_carries_fails_visibly(reg, world, superseded, what):
    """A database writer changes the superseding release after its approvals were carried: each change fails it
    naming what is wrong, with nothing in its folder."""
    _, successor = superseded
    change, named = CHANGES[what]
    with scope(study=reg.study):
        change(successor, ReleaseRequest.objects.get(pk=world.first.pk))
        publish.publish_release(successor.pk)
        failed = ReleaseRequest.objects.get(pk=successor.pk)
    assert failed.state == State.FAILED
    assert "not what the ethics officers approved" in failed.reason and named in failed.reason, failed.reason
    assert storage.walk(storages["releases"], successor.prefix) == []
