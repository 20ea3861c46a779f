"""The fixity check (services/runs.py) on a study with shards, a published release and a ready one-dataset download,
on the configured storage (the S3 gateway in CI) or local folders: a clean store records no problem and raises
nothing; a flipped byte (shard, released object, dataset object), a deleted object and an extra object (in a record's
folder, in the study's folder) are each reported with the right kind, object and detail, and alerted: an alert row,
an email to the study's coordinators and ethics officers who have an address, and the banner on their dashboard and
the study's pages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from exporter.receipt import RECEIPT
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.fixity import tasks
from portal.fixity.exceptions import FixityBusy
from portal.fixity.models import Alert, FixityProblem, FixityRun, FixityRunStudy
from portal.fixity.services import alerts, runs
from portal.releases.models import Release
from portal.research.models import Dataset
from tests.portal.fixity.conftest import flip_a_byte, replace

pytestmark = pytest.mark.django_db
Kind = FixityProblem.Kind


def problems_of(run: FixityRun) -> list[dict]:
    with scopes_disabled():
        return [problem.as_dict() for problem in run.problems.order_by("pk")]


def send_queued_emails(sent_tasks) -> None:
    """What the worker does with the emails the services queued."""
    for name, args in sent_tasks:
        if name == "fixity.email_alert":
            tasks.email_alert(*args)


def banner_on(client, user, url: str) -> str:
    client.force_login(user)
    page = client.get(url)
    assert page.status_code == 200, url
    return page.content.decode()


def test_a_clean_store_records_no_problem_and_raises_no_alert(store, sent_tasks, client):
    run = store.run()
    assert run.succeeded and run.problem_count == 0 and problems_of(run) == []
    # Every object of the study was listed and hashed, streamed from storage.
    assert run.objects_checked == run.objects_listed == len(store.objects())
    assert run.bytes_checked == sum(storage.digest(storages[name], key)[1] for name, key in store.objects())
    with scope(study=store.study):
        share = FixityRunStudy.objects.get(run=run)
        assert (share.objects_checked, share.problem_count) == (len(store.objects()), 0)
        assert not Alert.objects.exists()
    assert not [name for name, _ in sent_tasks if name == "fixity.email_alert"]
    assert mail.outbox == []
    assert 'class="alert-banner"' not in banner_on(client, store.team.reg.ethics, reverse("dashboard"))
    actions = list(AuditEvent.objects.filter(target_type="fixity.fixityrun").values_list("action", flat=True))
    assert actions == ["fixity.run_started", "fixity.run_finished"]


def _shard_object(store) -> tuple[str, str, str]:
    return "shards", f"{store.code}/episode-000000/data/chunk-000/file-000.parquet", "episode-000000"


def _released_object(store) -> tuple[str, str, str]:
    return "releases", f"releases/{store.code}/release-0001/episode-000001/meta/info.json", "release-0001"


def _dataset_object(store) -> tuple[str, str, str]:
    return "releases", f"datasets/{store.code}/dataset-0001/meta/info.json", "dataset-0001"


@pytest.mark.parametrize("where", [_shard_object, _released_object, _dataset_object],
                         ids=["shard", "released", "dataset"])
def test_a_flipped_byte_is_reported_and_alerted(store, where, sent_tasks, client, django_capture_on_commit_callbacks):
    storage_name, name, record = where(store)
    original = storage.digest(storages[storage_name], name)
    changed = flip_a_byte(storage_name, name)
    with django_capture_on_commit_callbacks(execute=True):
        run = store.run()
    new_sha, size = storage.digest(storages[storage_name], name)
    assert size == original[1] and new_sha != original[0] and len(changed) == size
    assert problems_of(run) == [{
        "kind": Kind.CHANGED, "storage": storage_name, "object": name,
        "detail": f"SHA-256 {new_sha}, {size} bytes; {record} records SHA-256 {original[0]}, {size} bytes"}]
    _assert_alerted(store, run, name, sent_tasks, client)


def _assert_alerted(store, run, name: str, sent_tasks, client) -> Alert:
    """One open fixity alert for the study naming the object, emailed to the coordinator and the ethics officer who
    have an address (not to the second ethics officer, who has none), and shown on their dashboard and study pages."""
    with scope(study=store.study):
        alert = Alert.objects.get()
        assert (alert.kind, alert.state, alert.run_id) == (Alert.Kind.FIXITY, Alert.State.OPEN, run.pk)
        assert name in alert.message and f"study {store.code}" in alert.message
        assert list(alert.problems.values_list("object_name", flat=True)) == [name]
    assert ("fixity.email_alert", (alert.pk,)) in sent_tasks
    send_queued_emails(sent_tasks)
    assert sorted(message.to[0] for message in mail.outbox) == ["coordinator@example.org", "ethics@example.org"]
    assert all(len(message.to) == 1 for message in mail.outbox)  # one message each: nobody sees another's address
    message = mail.outbox[0]
    assert store.code in message.subject and name in message.body
    assert reverse("alert-detail", args=[store.code, alert.pk]) in message.body
    for user in (store.team.reg.ethics, store.team.reg.coordinator):
        for url in (reverse("dashboard"), reverse("study-overview", args=[store.code])):
            page = banner_on(client, user, url)
            assert f'data-study="{store.code}" data-open-alerts="1"' in page, (user, url)
            assert reverse("alert-list", args=[store.code]) in page
    researcher_page = banner_on(client, store.researcher, reverse("dashboard"))
    assert 'class="alert-banner"' not in researcher_page  # researchers get no alerts
    alert.refresh_from_db()
    assert alert.emailed_to == 2 and alert.emailed_at is not None
    return alert


def test_a_deleted_object_is_reported_missing_and_alerted(store, sent_tasks, client,
                                                          django_capture_on_commit_callbacks):
    name = f"releases/{store.code}/release-0001/episode-000000/{RECEIPT}"
    storages["releases"].delete(name)
    with django_capture_on_commit_callbacks(execute=True):
        run = store.run()
    assert problems_of(run) == [{"kind": Kind.MISSING, "storage": "releases", "object": name,
                                 "detail": "release-0001 records it; it is not in storage"}]
    _assert_alerted(store, run, name, sent_tasks, client)


def _in_a_record_folder(store) -> tuple[str, str, str]:
    return ("shards", f"{store.code}/episode-000001/notes.txt",
            "in the folder of episode-000001, which does not record it")


def _in_the_study_folder(store) -> tuple[str, str, str]:
    return ("releases", f"releases/{store.code}/release-0009/episode-000000/meta/info.json",
            f"no record of study {store.code} accounts for it")


@pytest.mark.parametrize("where", [_in_a_record_folder, _in_the_study_folder], ids=["record-folder", "study-folder"])
def test_an_extra_object_is_reported_as_an_orphan_and_alerted(store, where, sent_tasks, client,
                                                              django_capture_on_commit_callbacks):
    storage_name, name, detail = where(store)
    replace(storage_name, name, b"put here by hand")
    with django_capture_on_commit_callbacks(execute=True):
        run = store.run()
    assert problems_of(run) == [{"kind": Kind.ORPHAN, "storage": storage_name, "object": name, "detail": detail}]
    _assert_alerted(store, run, name, sent_tasks, client)


@pytest.mark.usefixtures("local_folders")  # a whole-store run, on storages of the test's own
def test_an_orphan_outside_every_study_is_for_site_administrators_only(store, unique_code, sent_tasks,
                                                                      django_capture_on_commit_callbacks):
    """A folder named by no study's code: its objects are orphans of no study, in the admin only, never alerted."""
    name = f"datasets/{unique_code}-gone/dataset-0001/meta/info.json"
    replace("releases", name, b"{}")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            run = runs.run_fixity("test", full=True)  # the whole store
        with scopes_disabled():
            found = FixityProblem.objects.filter(run=run, object_name=name).get()
            assert found.study_id is None and found.kind == Kind.ORPHAN and found.alert_id is None
            assert f"no study has the code '{unique_code}-gone'" in found.detail
            assert not FixityProblem.objects.filter(run=run, study=store.study).exists()
            assert not Alert.objects.exists()
    finally:
        storages["releases"].delete(name)


def test_a_problem_found_again_joins_its_unresolved_alert_and_is_emailed_once(store, sent_tasks,
                                                                             django_capture_on_commit_callbacks):
    storage_name, name, _ = _shard_object(store)
    flip_a_byte(storage_name, name)
    with django_capture_on_commit_callbacks(execute=True):
        first = store.run()
        second = store.run()
    with scope(study=store.study):
        alert = Alert.objects.get()
        assert alert.run_id == first.pk
        assert list(alert.problems.order_by("pk").values_list("run_id", flat=True)) == [first.pk, second.pk]
    assert [args for task, args in sent_tasks if task == "fixity.email_alert"] == [(alert.pk,)]
    # Resolved, it is a new alert the next time.
    with scope(study=store.study):
        alerts.resolve(store.team.reg.ethics, alert, note="restored the shard from the backup")
    with django_capture_on_commit_callbacks(execute=True):
        store.run()
    with scope(study=store.study):
        assert Alert.objects.filter(state=Alert.State.OPEN).count() == 1


def test_folders_still_being_written_are_accounted_for_but_not_checked(store, sent_tasks):
    """A dataset that failed (asked for again later) claims its folder: what a build left there is no orphan."""
    with scope(study=store.study):
        Dataset.objects.filter(pk=store.dataset.pk).update(state=Dataset.State.FAILED)
    replace("releases", f"{store.dataset.prefix}half-written.parquet", b"partial")
    run = store.run()
    assert problems_of(run) == []
    assert run.objects_checked == len(store.objects()) - len(storage.walk(storages["releases"], store.dataset.prefix))


def test_an_unreadable_object_is_reported_and_the_run_goes_on(store, monkeypatch):
    storage_name, name, _ = _shard_object(store)
    real = storage.digest

    def digest(target, key):
        if key == name:
            raise PermissionError("access denied by the gateway")
        return real(target, key)

    monkeypatch.setattr(storage, "digest", digest)
    run = store.run()
    assert problems_of(run) == [{"kind": Kind.UNREADABLE, "storage": storage_name, "object": name,
                                 "detail": "cannot be read: PermissionError('access denied by the gateway')"}]
    assert run.succeeded and run.objects_checked == len(store.objects()) - 1


def test_a_damaged_record_is_reported_and_the_run_goes_on(store):
    """A release whose manifest kept in the database no longer parses: its folder is reported, the rest checked."""
    Release.objects.with_scopes_disabled().filter(pk=store.release.release.pk).update(manifest=b"{not json")
    run = store.run()
    prefix = f"releases/{store.code}/release-0001/"
    (problem,) = problems_of(run)
    assert (problem["kind"], problem["object"]) == (Kind.UNREADABLE, prefix)
    assert problem["detail"].startswith("the record of release-0001 cannot be read: JSONDecodeError(")
    released = len(storage.walk(storages["releases"], prefix))
    assert run.succeeded and run.objects_checked == len(store.objects()) - released


def test_a_storage_outage_stops_the_run_which_is_recorded(store, monkeypatch):
    def outage(*args):
        raise ConnectionRefusedError("the gateway is down")

    monkeypatch.setattr(storage, "digest", outage)
    with pytest.raises(ConnectionRefusedError):
        store.run()
    run = FixityRun.objects.get()
    assert run.finished_at is not None and "the gateway is down" in run.error and not run.succeeded
    assert list(AuditEvent.objects.filter(target_type="fixity.fixityrun").values_list("action", flat=True)) == [
        "fixity.run_started", "fixity.run_failed"]


def test_one_run_at_a_time_and_a_dead_one_is_taken_over(store):
    alive = FixityRun.objects.create(kind=FixityRun.Kind.SLICE, slice_index=0, slice_count=3, requested_by="x",
                                     lease_until=timezone.now() + timedelta(minutes=5))
    with pytest.raises(FixityBusy, match=f"fixity run {alive.pk} .* is still running"):
        store.run()
    assert runs.run_scheduled() is None  # beat just skips its turn
    FixityRun.objects.filter(pk=alive.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    run = store.run()
    alive.refresh_from_db()
    assert run.succeeded and alive.finished_at is not None and alive.error.startswith("abandoned")


def test_the_command_runs_a_full_pass_and_exits_1_on_a_problem(store, capsys):
    call_command("fixity_run", "--all", "--study", store.code)
    out = capsys.readouterr().out
    assert f"{len(store.objects())} checked" in out and "0 problems" in out
    name = f"{store.code}/stray.bin"
    storages["shards"].save(name, ContentFile(b"x"))
    with pytest.raises(SystemExit) as exited:
        call_command("fixity_run", "--all", "--study", store.code)
    assert exited.value.code == 1
    assert f"orphan: shards:{name}: no record of study {store.code} accounts for it" in capsys.readouterr().out
    assert FixityRun.objects.filter(kind=FixityRun.Kind.FULL, requested_by="command").count() == 2


def test_the_command_refuses_what_it_cannot_do(store):
    with pytest.raises(CommandError, match="--study limits a full pass: give --all too"):
        call_command("fixity_run", "--study", store.code)
    with pytest.raises(CommandError, match="no study with the code nosuch"):
        call_command("fixity_run", "--all", "--study", "nosuch")
    FixityRun.objects.create(kind=FixityRun.Kind.SLICE, slice_index=0, slice_count=3, requested_by="x",
                             lease_until=timezone.now() + timedelta(minutes=5))
    with pytest.raises(CommandError, match="is still running"):
        call_command("fixity_run", "--all")


def test_a_runs_duration_reads_as_people_say_it():
    started = timezone.now()
    run = FixityRun(kind=FixityRun.Kind.FULL, started_at=started)
    assert run.took == ""
    for seconds, said in ((0.42, "0.4 s"), (192, "3 min 12 s"), (3900, "1 h 5 min")):
        run.finished_at = started + timedelta(seconds=seconds)
        assert run.took == said


@pytest.mark.usefixtures("local_folders")  # a whole-store run, on storages of the test's own
def test_a_folder_with_no_record_inside_is_listed_in_one_go(store, unique_code, monkeypatch):
    """Orphans spread over many folders (a study deleted from the database, its objects left behind) are all
    reported, and the walk lists their tree in one listing instead of one request per folder: on S3, one paginated
    request per thousand objects rather than per folder (a store left with 40 000 such objects took minutes)."""
    names = [f"datasets/{unique_code}-gone/dataset-{n:04d}/part-{m}/file.bin" for n in range(6) for m in range(3)]
    for name in names:
        replace("releases", name, b"x")
    releases = storages["releases"]
    real_listdir, real_walk, listed, flat = releases.listdir, storage.walk, [], []

    def counted_listdir(folder):
        listed.append(folder)
        return real_listdir(folder)

    def recorded_walk(store_, prefix):
        flat.append(prefix)
        monkeypatch.setattr(releases, "listdir", real_listdir)  # what the flat listing itself does is not counted
        try:
            return real_walk(store_, prefix)
        finally:
            monkeypatch.setattr(releases, "listdir", counted_listdir)

    monkeypatch.setattr(releases, "listdir", counted_listdir)
    monkeypatch.setattr(runs.storage, "walk", recorded_walk)
    run = runs.run_fixity("test", full=True)
    with scopes_disabled():
        found = set(FixityProblem.objects.filter(run=run, object_name__in=names).values_list("object_name",
                                                                                            flat=True))
    assert found == set(names)
    assert f"datasets/{unique_code}-gone/" in flat
    assert not [folder for folder in listed if folder.startswith(f"datasets/{unique_code}-gone")]
