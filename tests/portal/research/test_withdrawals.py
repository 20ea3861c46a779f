"""A withdrawal reaches released data: no link from the moment it is recorded; then the job's reach lists exactly
the affected releases, datasets and researchers, removes their objects, supersedes the releases (what the
superseding release holds and carries: releases/test_supersede.py), leaves content-free tombstones, emails
exactly the affected researchers, and a re-run changes nothing."""

from __future__ import annotations

import json
import threading
from datetime import date

import pytest
from django.core import mail
from django.core.files.storage import storages
from django.db import connection
from django_scopes import scope

from portal.core import storage
from portal.recordings.models import Recording
from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, publish, release_requests
from portal.releases.services.approval import approve
from portal.releases.services.manifest import public_key
from portal.research.exceptions import AccessRefused
from portal.research.models import Dataset, IssuedLink, Tombstone, Withdrawal, WithdrawalNotice
from portal.research.services import datasets, links, withdrawals
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.study import set_carry_over_approvals
from tests.portal.research.conftest import item, run, withdraw

pytestmark = pytest.mark.django_db
RELEASE = ReleaseRequest.State


def counts(study) -> dict:
    with scope(study=study):
        return {"requests": ReleaseRequest.objects.count(), "tombstones": Tombstone.objects.count(),
                "notices": WithdrawalNotice.objects.count(), "mails": len(mail.outbox),
                "objects": len(storage.walk(storages["releases"], f"releases/{study.code}/"))
                + len(storage.walk(storages["releases"], f"datasets/{study.code}/"))}


def test_the_withdrawal_reaches_removes_supersedes_tombstones_and_tells_exactly_who_downloaded(
        reg, world, django_capture_on_commit_callbacks, sent_tasks):
    with scope(study=reg.study):  # the study asks for fresh approval of a superseding release
        set_carry_over_approvals(reg.coordinator, reg.study, False)
    withdrawal = withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)
    with scope(study=reg.study), pytest.raises(AccessRefused, match="no longer available"):
        links.release_links(world.researchers["r1"], world.first, ["episode-000002/meta/info.json"], via="api")

    done = run(withdrawal)
    assert done.state == Withdrawal.State.DONE
    reach = done.reach
    assert reach["episodes"] == [0, 2]
    assert [r["release_id"] for r in reach["releases"]] == ["release-0001"]
    assert [d["dataset_id"] for d in reach["datasets"]] == ["dataset-0001"]
    assert reach["open_requests"] == [world.draft.pk]
    assert {r["username"] for r in reach["researchers"]} == {world.researchers[n].username for n in ("r1", "r3")}

    releases = storages["releases"]
    left = storage.walk(releases, world.first.prefix)
    assert not [name for name in left if "/episode-000000/" in name or "/episode-000002/" in name]
    assert [name for name in left if "/episode-000001/" in name]
    assert [name.rsplit("/", 2)[1] for name in storage.walk(releases, world.datasets[0].prefix)] == [
        "tombstones", "tombstones"]  # the dataset is gone: only its tombstone and signature are left
    assert storage.walk(releases, world.datasets[1].prefix)  # the dataset without them is untouched
    with scope(study=reg.study):
        first = ReleaseRequest.objects.get(pk=world.first.pk)
        successor = ReleaseRequest.objects.get(supersedes=first)
        assert first.state == RELEASE.SUPERSEDED and successor.state == RELEASE.AWAITING_APPROVAL
        assert list(successor.items.values_list("episode_index", flat=True)) == [1]
        assert ReleaseRequest.objects.get(pk=world.draft.pk).state == RELEASE.REJECTED
        assert ReleaseRequest.objects.get(pk=world.other.pk).state == RELEASE.RELEASED
        assert Dataset.objects.get(pk=world.datasets[0].pk).state == Dataset.State.WITHDRAWN
        tombstone = Tombstone.objects.get(release=first)
        assert tombstone.episode_indexes == [0, 2] and tombstone.superseded_by == successor

    designator, headset = reg.demonstrator.designator, reg.headset.headset_id
    stone = releases.open(tombstone.object_name).read()
    assert json.loads(stone) == {**json.loads(stone), "episodes_removed": [0, 2], "reason": "consent withdrawn",
                                 "superseded_by": successor.release_id, "release_id": "release-0001"}
    public_key().verify(releases.open(tombstone.object_name + ".sig").read(), stone)
    assert sorted(message.to[0] for message in mail.outbox) == ["r1@lab.example", "r3@lab.example"]
    for text in [stone.decode(), *(m.subject + m.body for m in mail.outbox)]:
        assert designator not in text and headset not in text
    r1_mail = next(m for m in mail.outbox if m.to == ["r1@lab.example"])
    assert "release-0001/episode-000000/meta/info.json" in r1_mail.body and "episode-000001" not in r1_mail.body

    from portal.fixity.services.runs import run_fixity

    checked = run_fixity("test", full=True, studies=[reg.study])  # the store as the withdrawal left it is clean
    with scope(study=reg.study):
        assert list(checked.problems.values_list("kind", "object_name")) == []
    assert checked.objects_checked > 0

    before = counts(reg.study)
    assert run(done) is not None and counts(reg.study) == before  # delivered again: done, nothing happens
    with scope(study=reg.study):
        Withdrawal.objects.filter(pk=done.pk).update(state=Withdrawal.State.RUNNING, lease_until=None)
    assert run(done).state == Withdrawal.State.DONE and counts(reg.study) == before  # killed before its end


def test_the_pipeline_refuses_to_export_or_release_a_withdrawn_demonstrators_recordings(
        reg, verified_factory, make_request, team, django_capture_on_commit_callbacks, sent_tasks, make_capture):
    from portal.recordings.services.export import export_recording
    from portal.recordings.services.ingest import ingest_path

    episode = verified_factory(reg)
    approved = make_request([episode])
    with scope(study=reg.study):
        for officer in (reg.ethics, team.ethics2):
            approve(officer, approved, manifest_sha256=approved.manifest_sha256)
        queued = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), seconds=1.0))
    assert queued.state == Recording.State.QUEUED
    withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)
    with scope(study=reg.study):
        export_recording(queued.pk)
        queued.refresh_from_db()
        publish.publish_release(approved.pk)
        approved.refresh_from_db()
    assert queued.state == Recording.State.FAILED and "export refused: the consent no longer covers" in queued.reason
    assert approved.state == RELEASE.FAILED and "withdrew consent" in approved.reason
    assert storage.walk(storages["releases"], approved.prefix) == []
    with scope(study=reg.study), pytest.raises(gate.GateFailed, match=r"cannot be submitted"):
        release_requests.submit(reg.coordinator, make_request([episode], submit=False))


@pytest.mark.django_db(transaction=True)
def test_a_link_request_racing_the_withdrawal_is_refused(reg, released, researcher, monkeypatch):
    """The withdrawal holds the demonstrator's row until it commits; a link request for the same episode waits for
    it, then reads the withdrawal and is refused (PostgreSQL: two connections at once)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: two transactions at once")
    from django.db import connections

    recorded, go = threading.Event(), threading.Event()
    opened = withdrawals.open_withdrawal

    def hold(event):  # inside the withdrawal's transaction, after the event is written
        recorded.set()
        assert go.wait(30)
        return opened(event)

    monkeypatch.setattr(withdrawals, "open_withdrawal", hold)
    outcome = {}

    def withdrawing():
        try:
            with scope(study=reg.study):
                withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(), reason="asked")
        finally:
            connections.close_all()

    def asking():
        try:
            with scope(study=reg.study):
                links.release_links(researcher, released, ["episode-000000/meta/info.json"], via="api")
            outcome["link"] = "issued"
        except AccessRefused as refused:
            outcome["link"] = str(refused)
        finally:
            connections.close_all()

    first = threading.Thread(target=withdrawing)
    first.start()
    try:
        assert recorded.wait(30)
        second = threading.Thread(target=asking)
        second.start()
        with connection.cursor() as cursor:  # until the link request waits for the demonstrator's row lock
            for _ in range(600):
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    break
                threading.Event().wait(0.05)
            else:
                raise AssertionError("the link request never waited for the withdrawal")
        go.set()
        first.join(30)
        second.join(30)
    finally:
        go.set()
    assert "is no longer available" in outcome["link"]
    with scope(study=reg.study):
        assert not IssuedLink.objects.filter(user=researcher).exists()


def test_stewards_see_the_reach_and_its_progress(reg, world, client, django_capture_on_commit_callbacks,
                                                 sent_tasks):
    withdrawal = withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)
    client.force_login(reg.ethics)
    queued = client.get(f"/studies/{reg.study.code}/withdrawals/{withdrawal.pk}/").content.decode()
    assert "data-status-url" in queued and "Queued" in queued
    # Nothing counted yet: "queued", not "waiting for a worker: 0 of 0" beside an empty bar.
    assert '<span id="phase">Queued, waiting for a worker</span><span id="counts" hidden>' in queued
    run(withdrawal)
    page = client.get(f"/studies/{reg.study.code}/withdrawals/{withdrawal.pk}/").content.decode()
    assert "release-0001 (2 episode(s))" in page and "dataset-0001" in page and "data-status-url" not in page
    assert world.researchers["r1"].username in page and "in their inbox; email delivered" in page
    status = client.get(f"/studies/{reg.study.code}/withdrawals/{withdrawal.pk}/status/").json()
    assert status["state"] == "done"
    listed = client.get(f"/studies/{reg.study.code}/withdrawals/").content.decode()
    assert f"/withdrawals/{withdrawal.pk}/" in listed


def test_a_demonstrator_in_two_published_releases_and_a_dataset_leaves_all_of_them(
        reg, second, verified_factory, make_released, make_researcher, django_capture_on_commit_callbacks,
        sent_tasks):
    """Episodes 0 and 2 of the withdrawing demonstrator, 1 of the other: release-0001 holds 0 and 1, release-0002
    holds 2 and 1, dataset-0001 holds 0 (from release-0001) and 2 (from release-0002), dataset-0002 holds 2 and 1.
    The job must handle every release and dataset in its reach, not only the first."""
    episodes = [verified_factory(reg), verified_factory(second), verified_factory(reg)]
    first = make_released([episodes[0], episodes[1]])
    later = make_released([episodes[2], episodes[1]])
    researcher = make_researcher("two-releases")
    with scope(study=reg.study):
        mixed, _ = datasets.request_dataset(researcher, reg.study, [item(first, 0), item(later, 2)])
        datasets.build_dataset(mixed.pk)
        assert Dataset.objects.get(pk=mixed.pk).state == Dataset.State.READY
        with_other, _ = datasets.request_dataset(researcher, reg.study, [item(later, 2), item(later, 1)])
        datasets.build_dataset(with_other.pk)

    done = run(withdraw(reg, django_capture_on_commit_callbacks, sent_tasks))
    assert done.state == Withdrawal.State.DONE
    assert [(r["release_id"], r["episodes"]) for r in done.reach["releases"]] == [
        ("release-0001", [0]), ("release-0002", [2])]
    assert [d["dataset_id"] for d in done.reach["datasets"]] == ["dataset-0001", "dataset-0002"]

    releases = storages["releases"]
    for release in (first, later):
        left = storage.walk(releases, release.prefix)
        assert not [name for name in left if "/episode-000000/" in name or "/episode-000002/" in name], release
        assert [name for name in left if "/episode-000001/" in name], release  # the other demonstrator stays
    for dataset in (mixed, with_other):
        assert {name.rsplit("/", 2)[1] for name in storage.walk(releases, dataset.prefix)} == {"tombstones"}
    with scope(study=reg.study):
        for release, removed in ((first, [0]), (later, [2])):
            release = ReleaseRequest.objects.get(pk=release.pk)
            successor = ReleaseRequest.objects.get(supersedes=release)
            assert release.state == RELEASE.SUPERSEDED, release.release_id
            assert list(successor.items.values_list("episode_index", flat=True)) == [1]
            tombstone = Tombstone.objects.get(withdrawal=done, release=release)
            assert tombstone.episode_indexes == removed and tombstone.superseded_by == successor
            stone = releases.open(tombstone.object_name).read()
            assert json.loads(stone)["episodes_removed"] == removed
            assert json.loads(stone)["release_id"] == release.release_id
            public_key().verify(releases.open(tombstone.object_name + ".sig").read(), stone)
        for dataset, removed in ((mixed, [0, 2]), (with_other, [2])):
            assert Dataset.objects.get(pk=dataset.pk).state == Dataset.State.WITHDRAWN, dataset.dataset_id
            assert Tombstone.objects.get(withdrawal=done, dataset=dataset).episode_indexes == removed
        assert Tombstone.objects.filter(withdrawal=done).count() == 4
