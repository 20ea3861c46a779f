"""A withdrawal reaches released data: no link from the moment it is recorded; then the job's reach lists exactly
the affected releases, datasets and researchers, removes their objects, supersedes the releases (the new one
verifies and its one-dataset download loads in LeRobot without the episodes), leaves content-free tombstones,
emails exactly the affected researchers, and a re-run changes nothing."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import date, timedelta

import pytest
from django.core import mail
from django.core.files.storage import storages
from django.db import connection
from django_scopes import scope

from exporter.release import verify_release
from portal.core import storage
from portal.notifications import services as notifications
from portal.notifications.models import Email, Notification
from portal.recordings.models import Recording
from portal.releases.models import Approval, ReleaseRequest
from portal.releases.services import gate, publish, release_requests
from portal.releases.services.approval import approve
from portal.releases.services.manifest import public_key
from portal.research.exceptions import AccessRefused
from portal.research.models import Dataset, IssuedLink, Tombstone, Withdrawal, WithdrawalNotice
from portal.research.services import catalogue, datasets, links, withdrawals
from portal.studies.services.consent import give_consent, withdraw_consent
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.study import set_carry_over_approvals
from tests.portal.research.lerobot_kept import keep_for_lerobot
from tests.portal.research.linkfetch import fetch

pytestmark = pytest.mark.django_db
RELEASE = ReleaseRequest.State


@pytest.fixture
def second(reg):
    """A second demonstrator of the study, with consent, who does not withdraw."""
    with scope(study=reg.study):
        other = create_demonstrator(reg.coordinator, reg.study, headset=reg.headset)
        give_consent(reg.coordinator, other, document=reg.document, consent_date=date.today() - timedelta(days=30),
                     scopes=["episode_release"])
    return dataclasses.replace(reg, demonstrator=other)


def item(request, index):
    with scope(study=request.study):
        return catalogue.released_items().select_related("request", "episode__recording").get(
            request=request, episode_index=index)


def researcher_with_email(make_researcher, name):
    user = make_researcher(name)
    user.email = f"{name}@lab.example"
    user.save()
    return user


@pytest.fixture
def world(reg, second, verified_factory, make_released, make_request, make_researcher, client):
    """Episodes 0 and 2 of the withdrawing demonstrator, 1 of the other; release-0001 holds all three, release-0002
    only episode 1; dataset-0001 holds 0 and 1, dataset-0002 only 1; a draft (release-0003) holds episode 2. r1
    downloaded a file of episode 0, r2 only of episode 1, r3 built dataset-0001 and downloaded from it, r4 only
    used release-0002."""
    episodes = [verified_factory(reg), verified_factory(second), verified_factory(reg)]
    first = make_released(episodes)
    other = make_released([episodes[1]])
    draft = make_request([episodes[2]], submit=False)
    r1, r2, r3, r4 = (researcher_with_email(make_researcher, name) for name in ("r1", "r2", "r3", "r4"))
    with scope(study=reg.study):
        links.release_links(r1, first, ["episode-000000/meta/info.json"], via="api")
        links.release_links(r2, first, ["episode-000001/meta/info.json"], via="api")
        links.release_links(r4, other, via="api")
        with_hole, _ = datasets.request_dataset(r3, reg.study, [item(first, 0), item(first, 1)])
        datasets.build_dataset(with_hole.pk)
        untouched, _ = datasets.request_dataset(r4, reg.study, [item(other, 1)])
        datasets.build_dataset(untouched.pk)
        links.dataset_links(r3, Dataset.objects.get(pk=with_hole.pk), ["meta/info.json"], via="api")
    return dataclasses.make_dataclass("World", ["first", "other", "draft", "researchers", "datasets"])(
        first, other, draft, {"r1": r1, "r2": r2, "r3": r3, "r4": r4}, (with_hole, untouched))


def withdraw(reg, django_capture_on_commit_callbacks, sent_tasks) -> Withdrawal:
    with scope(study=reg.study), django_capture_on_commit_callbacks(execute=True):
        event = withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(),
                                 reason="asked by the participant")
    with scope(study=reg.study):
        withdrawal = Withdrawal.objects.select_related("study").get(event=event)
    assert ("research.apply_withdrawal", (withdrawal.pk,)) in sent_tasks
    return withdrawal


def run(withdrawal: Withdrawal) -> Withdrawal:
    """The job, then the emails of its messages (what the worker sends once the job's transactions commit)."""
    with scope(study=withdrawal.study):
        withdrawals.apply_withdrawal(withdrawal.pk)
        for pending in Notification.objects.filter(key=f"withdrawal:{withdrawal.pk}", email=Email.PENDING):
            notifications.deliver(pending.pk)
        return Withdrawal.objects.get(pk=withdrawal.pk)


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
def test_a_link_request_racing_the_withdrawal_is_refused(reg, released, researcher):
    """The withdrawal holds the demonstrator's row until it commits; a link request for the same episode waits for
    it, then reads the withdrawal and is refused (PostgreSQL: two connections at once)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: two transactions at once")
    from django.db import connections

    from portal.studies.signals import consent_withdrawn

    recorded, go = threading.Event(), threading.Event()

    def hold(sender, **kwargs):  # inside the withdrawal's transaction, after the event is written
        recorded.set()
        assert go.wait(30)

    consent_withdrawn.connect(hold, dispatch_uid="test.hold")
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
        consent_withdrawn.disconnect(dispatch_uid="test.hold")
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
