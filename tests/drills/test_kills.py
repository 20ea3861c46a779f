"""Drill: a worker SIGKILLed at a random point of each long job — an export, a release, a one-dataset assembly and a
withdrawal — ``CERES_DRILL_KILLS`` times each (20 by default), on the run's real database, storage and a RabbitMQ
broker. Each time the worker stops for certain just before a storage write or delete chosen at random (a seeded
generator per demonstrator: the same points on every run) among the job's own (a release's shard objects are
placed by ``storage.copy``, counted as one each), is killed there, and the next worker
picks the message up again. Every job must complete exactly once, and at the end the fixity check over the whole
study finds no partial, missing or extra object in any storage.

How many storage operations each kind of job makes is counted first, on one demonstrator's jobs run without a kill.
Then each of ``KILLS`` demonstrators goes through export, release, one-dataset download and withdrawal with a kill in
each; ``CERES_DRILL_WORKERS`` of them (4) at once, each with a forked worker and a queue of its own, all driven from
this one thread (the workers are forked from it, never from a second thread).
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import date, timedelta

import pytest
from django.core.files.storage import storages
from django.utils import timezone
from django_scopes import scope

from exporter.receipt import RECEIPT
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.recordings.models import Episode, Recording
from portal.recordings.services.ingest import ingest_path
from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, release_requests
from portal.releases.services.approval import approve
from portal.research.models import Dataset, Tombstone, Withdrawal
from portal.research.services import access, catalogue, datasets
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.consent import give_consent
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.study import publish_data_use_agreement
from tests.drills.forked_worker import RABBIT, ForkedWorker, rabbit_up

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
KILLS = int(os.environ.get("CERES_DRILL_KILLS", "20"))
WORKERS = int(os.environ.get("CERES_DRILL_WORKERS", "4"))
TIMEOUT = 240.0
JOBS = ("recordings.export_recording", "releases.publish_release", "research.build_dataset",
        "research.apply_withdrawal")


def events(action: str, target) -> int:
    label = f"{target._meta.app_label}.{target._meta.model_name}"
    return AuditEvent.objects.filter(action=action, target_type=label, target_id=str(target.pk)).count()


@pytest.fixture
def workers(tmp_path, settings):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): the forked workers share the test's database")
    if not rabbit_up():
        pytest.skip("needs RabbitMQ (CERES_DRILL_BROKER_URL): it gives a killed worker's message back at once")
    for name in ("CERES_EXPORT_LEASE_SECONDS", "CERES_RELEASE_LEASE_SECONDS", "CERES_DATASET_LEASE_SECONDS",
                 "CERES_WITHDRAWAL_LEASE_SECONDS"):
        setattr(settings, name, 1)  # a killed attempt's lease runs out in a second
    made = [ForkedWorker(queue=f"ceres-drill-{uuid.uuid4().hex[:12]}", folder=tmp_path) for _ in range(WORKERS + 1)]
    yield made
    from portal.celery import app

    for forked in made:
        forked.kill()
    with app.connection_for_write(RABBIT) as connection:
        for forked in made:
            connection.default_channel.queue_delete(forked.queue)


@dataclass
class Study:
    """What every demonstrator's jobs share: the registry, a second officer and a granted researcher."""

    reg: object
    officer2: object
    researcher: object
    make_capture: Callable


Step = Generator[None, None, object]  # a job's progress: it yields while it waits, and returns its result


def until(predicate, what: str) -> Step:
    deadline = time.monotonic() + TIMEOUT
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {TIMEOUT:.0f} s waiting for {what}")
        yield
    return value


def run(task: str, obj_id: int, done, what: str, worker: ForkedWorker, *, kill_at: int | None) -> Step:
    """The job through ``worker``: killed before its ``kill_at``-th storage operation, then finished by a fresh
    worker; or, without ``kill_at``, run whole while its storage operations are counted. Returns where it was
    killed, or the count."""
    worker.start(stop_at=kill_at, count=kill_at is None)
    worker.send(task, obj_id)
    if kill_at is None:
        yield from until(done, what)
        return worker.operations()
    where = yield from until(lambda: worker.poll_stopped(done), f"the kill point of {what}")
    worker.kill()
    worker.start()
    yield from until(done, f"{what} after a kill")
    return where


def state_is(model, pk: int, state, study) -> Callable[[], bool]:
    """Whether the object reached ``state``; a job that failed instead fails the drill at once, saying why."""
    def check() -> bool:
        with scope(study=study):
            obj = model.objects.get(pk=pk)
        if obj.state == "failed":
            raise AssertionError(f"{obj!r} failed: {getattr(obj, 'last_error', '') or getattr(obj, 'reason', '')}")
        return obj.state == state
    return check


def journey(s: Study, worker: ForkedWorker, person, rng: random.Random, counts: dict[str, int],
            killed_at: list[str], made: dict) -> Step:
    """One demonstrator's recording exported, released, downloaded as one dataset, then withdrawn: each job killed
    once at a random point of its own (or, for the first, counted). ``made`` collects what was made."""
    study = s.reg.study

    def job(task: str, obj_id: int, done, what: str) -> Step:
        if task not in counts:
            counts[task] = yield from run(task, obj_id, done, what, worker, kill_at=None)
            return None
        killed_at.append((yield from run(task, obj_id, done, what, worker, kill_at=rng.randint(1, counts[task]))))
        return None

    with scope(study=study):
        recording = ingest_path(s.reg.coordinator, study, s.make_capture(
            s.reg.claims(demonstrator_id=person.designator), seconds=1.0, width=32, height=24))
    assert recording.state == Recording.State.QUEUED
    yield from job(JOBS[0], recording.pk, state_is(Recording, recording.pk, Recording.State.VERIFIED, study),
                   "an export")
    with scope(study=study):
        episode = Episode.objects.select_related("recording").get(recording=recording)
        release = release_requests.create_request(s.reg.coordinator, study, episodes=[episode], purpose="drill")
        gate.inspect_request(release)
        release_requests.submit(s.reg.coordinator, release)
        for officer in (s.reg.ethics, s.officer2):
            approve(officer, release, manifest_sha256=release.manifest_sha256)
    yield from job(JOBS[1], release.pk, state_is(ReleaseRequest, release.pk, ReleaseRequest.State.RELEASED, study),
                   "a release")
    with scope(study=study):
        item = catalogue.released_items().select_related("request").get(request=release)
        dataset, _ = datasets.request_dataset(s.researcher, study, [item])
    yield from job(JOBS[2], dataset.pk, state_is(Dataset, dataset.pk, Dataset.State.READY, study), "a dataset")
    with scope(study=study):
        event = withdraw_consent(s.reg.coordinator, person, withdrawal_date=date.today(), reason="drill")
        withdrawal = Withdrawal.objects.get(event=event)
    yield from job(JOBS[3], withdrawal.pk, state_is(Withdrawal, withdrawal.pk, Withdrawal.State.DONE, study),
                   "a withdrawal")
    made.setdefault("episodes", []).append(episode)
    made.setdefault("releases", []).append(release)
    made.setdefault("datasets", []).append(dataset)
    made.setdefault("withdrawals", []).append(withdrawal)


def drive(steps: list[Step]) -> None:
    """Advance every journey in turn, from this thread, until all are done."""
    while steps:
        for step in list(steps):
            try:
                next(step)
            except StopIteration:
                steps.remove(step)
        time.sleep(0.02)


def test_jobs_killed_at_random_points_complete_exactly_once(make_registry, make_capture, make_user, workers):
    reg = make_registry()
    study = reg.study
    people = []
    with scope(study=study):
        for _ in range(KILLS + 1):
            person = create_demonstrator(reg.coordinator, study, headset=reg.headset)
            give_consent(reg.coordinator, person, document=reg.document, consent_date=date.today() - timedelta(days=30),
                         scopes=["episode_release"])
            people.append(person)
    agreement = publish_data_use_agreement(reg.coordinator, study, text="Drill agreement.")
    researcher = make_user(f"{study.code}-researcher")
    asked = access.request_access(researcher, study, purpose="drill", version=agreement.version,
                                  sha256=agreement.sha256)
    access.grant_access(reg.coordinator, asked, expires_at=timezone.now() + timedelta(days=30))
    s = Study(reg, make_user(f"{study.code}-ethics2", study, ["ethics_officer"]), researcher, make_capture)

    counts: dict[str, int] = {}
    killed_at: list[str] = []
    counted: dict = {}
    drive([journey(s, workers[0], people[0], random.Random(0), counts, killed_at, counted)])
    assert set(counts) == set(JOBS) and not killed_at and all(counts.values()), counts

    made: dict = {}
    queued = [(person, random.Random(2026 + n)) for n, person in enumerate(people[1:])]
    lanes: list[list] = [queued[n::WORKERS] for n in range(WORKERS)]

    def lane(worker: ForkedWorker, turns: list) -> Step:
        for person, rng in turns:
            yield from journey(s, worker, person, rng, counts, killed_at, made)

    drive([lane(worker, turns) for worker, turns in zip(workers[1:], lanes, strict=True) if turns])

    with scope(study=study):
        episodes = made["episodes"]
        assert len(episodes) == KILLS and len({e.episode_index for e in episodes}) == KILLS
        for episode in episodes:
            assert events("recording.exported", episode.recording) == 1
            assert storage.walk(storages["shards"], episode.prefix) == sorted(
                {episode.prefix + f["path"] for f in episode.shard_files} | {episode.prefix + RECEIPT})
        for release in made["releases"]:
            assert events("release.published", release) == 1 and events("release.signed", release) == 1
            assert ReleaseRequest.objects.get(pk=release.pk).state == ReleaseRequest.State.SUPERSEDED
            assert not ReleaseRequest.objects.filter(supersedes=release).exists()  # its only episode left
        for dataset in made["datasets"]:
            assert events("research.dataset_ready", dataset) == 1
        for withdrawal in made["withdrawals"]:
            assert events("research.withdrawal_applied", withdrawal) == 1
            assert Tombstone.objects.filter(withdrawal=withdrawal).count() == 2  # the release's and the dataset's

    from portal.fixity.services.runs import run_fixity

    checked = run_fixity("drill", full=True, studies=[study])
    with scope(study=study):
        assert list(checked.problems.values_list("kind", "object_name")) == []
    assert checked.objects_checked > 0
    assert len(killed_at) == 4 * KILLS
    assert all(point.split()[0] in ("put", "copy", "delete") for point in killed_at)
    print(f"storage operations per job: {counts}; kill points: {sorted(p.split()[0] for p in killed_at)}")


def finish(step: Step):
    """Drive one job's steps to the end, from this thread; its result."""
    while True:
        try:
            next(step)
        except StopIteration as done:
            return done.value
        time.sleep(0.02)


def test_a_release_killed_before_each_of_its_storage_operations_completes_once(make_registry, make_capture,
                                                                            make_user, workers):
    """Not at random: one release's storage operations are counted, then a release of the same episode is killed
    before each of them in turn — every shard object's ``storage.copy`` (a server-side copy on S3, a hard link on
    local folders), each card file, the manifest and its signature — and finished by a fresh worker. Each
    completes once with exactly its manifest's objects, and the fixity check finds nothing partial or extra."""
    reg = make_registry()
    study, worker = reg.study, workers[0]
    officer2 = make_user(f"{study.code}-ethics2", study, ["ethics_officer"])
    with scope(study=study):
        person = create_demonstrator(reg.coordinator, study, headset=reg.headset)
        give_consent(reg.coordinator, person, document=reg.document, consent_date=date.today() - timedelta(days=30),
                     scopes=["episode_release"])
        recording = ingest_path(reg.coordinator, study, make_capture(
            reg.claims(demonstrator_id=person.designator), seconds=1.0, width=32, height=24))
    finish(run(JOBS[0], recording.pk, state_is(Recording, recording.pk, Recording.State.VERIFIED, study),
               "an export", worker, kill_at=None))
    with scope(study=study):
        episode = Episode.objects.select_related("recording").get(recording=recording)

    def approved() -> ReleaseRequest:
        with scope(study=study):
            release = release_requests.create_request(reg.coordinator, study, episodes=[episode], purpose="drill")
            gate.inspect_request(release)
            release_requests.submit(reg.coordinator, release)
            for officer in (reg.ethics, officer2):
                approve(officer, release, manifest_sha256=release.manifest_sha256)
        return release

    def released(release: ReleaseRequest):
        return state_is(ReleaseRequest, release.pk, ReleaseRequest.State.RELEASED, study)

    first = approved()
    operations = finish(run(JOBS[1], first.pk, released(first), "a release", worker, kill_at=None))
    counted = worker.operation_kinds()
    killed_at, made = [], [first]
    for point in range(1, operations + 1):
        release = approved()
        killed_at.append(finish(run(JOBS[1], release.pk, released(release), f"a release killed at {point}",
                                    worker, kill_at=point)))
        made.append(release)

    with scope(study=study):
        for release in made:
            executed = ReleaseRequest.objects.select_related("release").get(pk=release.pk).release
            assert events("release.published", release) == 1 and events("release.signed", release) == 1
            assert len(storage.walk(storages["releases"], release.prefix)) == executed.objects_total
    from portal.fixity.services.runs import run_fixity

    checked = run_fixity("drill", full=True, studies=[study])
    with scope(study=study):
        assert list(checked.problems.values_list("kind", "object_name")) == []
    with scope(study=study):
        copies = len(first.items.get().files)  # every file of the shard, its receipt included
    # Each copy is one point, and on S3 a small object's PUT inside it one more. The copies run on a pool, so which
    # kind comes k-th differs between runs: the kinds are counted on the uncut run, each kill point only named.
    assert (counted.count("copy"), set(counted), len(counted)) == (copies, {"copy", "put"}, operations), counted
    kinds = [point.split()[0] for point in killed_at]
    assert len(kinds) == operations and set(kinds) <= {"copy", "put"}, killed_at
    print(f"a release's storage operations: {operations}; killed before each: {killed_at}")
