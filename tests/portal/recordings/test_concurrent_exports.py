"""Concurrent exports of one study on PostgreSQL: distinct episodes, contiguous frame ranges, one task table."""

from __future__ import annotations

import io
import itertools
import random

import pyarrow.parquet as pq
import pytest
from django.core.files.storage import storages
from django.db import connection
from django_scopes import scope

from portal.recordings.exceptions import PipelineError
from portal.recordings.models import Episode, Recording, StudyDataset
from portal.recordings.services.export import allocate_episode, export_recording, fail_export, retry_export
from portal.recordings.services.ingest import ingest_path
from tests.portal.concurrency import needs_postgres, run_at_once

pytestmark = needs_postgres


def check_dataset(study) -> list[Episode]:
    with scope(study=study):
        episodes = list(Episode.objects.order_by("episode_index"))
        dataset = StudyDataset.objects.get()
        texts = {e.pk: e.recording.summary["tasks"] for e in episodes}
    assert [e.episode_index for e in episodes] == list(range(len(episodes)))
    assert episodes[0].from_index == 0
    for before, after in itertools.pairwise(episodes):
        assert after.from_index == before.to_index
    assert dataset.next_episode_index == len(episodes) and dataset.next_frame_index == episodes[-1].to_index
    assert len(set(dataset.tasks)) == len(dataset.tasks)
    for episode in episodes:
        assert set(texts[episode.pk]) <= set(dataset.tasks[: episode.task_count])
    counts = [e.task_count for e in episodes]
    assert counts == sorted(counts)  # a higher episode index never sees a shorter task table
    return episodes


def test_eight_exports_at_once(reg, make_capture):
    with scope(study=reg.study):
        recordings = [ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), seconds=1.0))
                      for _ in range(8)]
    assert all(r.state == Recording.State.QUEUED for r in recordings), [r.reason for r in recordings]
    run_at_once(reg.study, [lambda pk=r.pk: export_recording(pk) for r in recordings])
    episodes = check_dataset(reg.study)
    assert len(episodes) == 8
    with scope(study=reg.study):
        assert set(Recording.objects.values_list("state", flat=True)) == {Recording.State.EXPORTED}
        final_tasks = StudyDataset.objects.get().tasks
    for episode in episodes:
        with storages["shards"].open(episode.prefix + "meta/tasks.parquet", "rb") as stream:
            table = pq.read_table(io.BytesIO(stream.read())).to_pandas()
        assert list(table.index) == final_tasks[: episode.task_count]
        with storages["shards"].open(episode.prefix + "data/chunk-000/"
                                     f"file-{episode.episode_index:03d}.parquet", "rb") as stream:
            index = pq.read_table(io.BytesIO(stream.read())).column("index").to_pylist()
        assert index == list(range(episode.from_index, episode.to_index))


@pytest.mark.parametrize("round_number", range(12))
def test_allocation_races_repeated(reg, round_number):
    """Allocation alone, many rounds: 8 threads and a retry of each at once, task texts overlapping."""
    rng = random.Random(round_number)
    vocabulary = [f"task {i}" for i in range(6)]
    with scope(study=reg.study):
        recordings = [Recording.objects.create(study=reg.study, via="test", original_name=f"r{i}",
                                               state=Recording.State.RUNNING,
                                               summary={"rows": rng.randint(1, 500),
                                                        "tasks": rng.sample(vocabulary, 3)})
                      for i in range(8)]
    run_at_once(reg.study, [lambda r=r: allocate_episode(r) for r in recordings for _ in range(2)])
    episodes = check_dataset(reg.study)
    assert len(episodes) == 8
    assert [e.length for e in sorted(episodes, key=lambda e: e.recording_id)] == [r.summary["rows"]
                                                                                   for r in recordings]
    assert connection.vendor == "postgresql"


def test_two_retries_at_once_queue_one_export(reg, make_capture):
    from portal.audit.models import AuditEvent

    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), seconds=1.0))
        fail_export(recording, "export failed: simulated")
    outcomes: list[str] = []

    def retry():
        try:
            retry_export(reg.coordinator, Recording.objects.get(pk=recording.pk))
            outcomes.append("queued")
        except PipelineError as exc:
            outcomes.append(str(exc))

    run_at_once(reg.study, [retry, retry])
    assert sorted(outcomes) == ["only a failed export can be retried; this one is queued", "queued"]
    assert AuditEvent.objects.filter(action="recording.export_retried").count() == 1
