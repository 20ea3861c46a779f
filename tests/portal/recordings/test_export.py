"""Export into the shards storage (services/export.py), allocation reuse on retry, a live lease, failures with
their reason; verification against the receipt is in test_verification.py."""

from __future__ import annotations

import io
import json
import re

import pyarrow.parquet as pq
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django_scopes import scope

from exporter.receipt import RECEIPT
from portal.core.errors import LeaseBusy
from portal.recordings.models import Episode, Recording, StudyDataset
from portal.recordings.services.export import allocate_episode, claim_export, export_recording, retry_export
from portal.recordings.services.verification import verify_episode
from tests.portal.recordings.conftest import accepted, export

pytestmark = pytest.mark.django_db

State = Recording.State


def read_parquet(name: str):
    with storages["shards"].open(name, "rb") as stream:
        return pq.read_table(io.BytesIO(stream.read()))


def test_export_writes_a_complete_shard_and_verifies(reg, make_capture, stored_objects):
    first = export(reg, accepted(reg, make_capture))
    second = export(reg, accepted(reg, make_capture))
    assert first.state == second.state == State.EXPORTED, (first.reason, second.reason)
    with scope(study=reg.study):
        episodes = [first.episode, second.episode]
        dataset = StudyDataset.objects.get()
    assert [e.episode_index for e in episodes] == [0, 1]
    assert episodes[1].from_index == episodes[0].length
    assert dataset.next_frame_index == sum(e.length for e in episodes)
    for episode in episodes:
        names = stored_objects("shards", episode.prefix)
        receipt = json.loads(storages["shards"].open(episode.prefix + RECEIPT).read())
        assert sorted([*(episode.prefix + a["path"] for a in receipt["artefacts"]), episode.prefix + RECEIPT]) \
            == names
        data = read_parquet(next(n for n in names if n.endswith(".parquet") and "/data/" in n))
        index = data.column("index").to_pylist()
        assert index == list(range(episode.from_index, episode.to_index))
        metadata = json.loads(storages["shards"].open(episode.prefix + "ceres/episode-metadata.json").read())
        assert metadata["study"]["headset_id"] == "HS-01"
        assert metadata["study"]["demonstrator_id"] == reg.demonstrator.designator
        assert metadata["study"]["consent_document_id"] == "ICF-2026-03 v1"
        assert metadata["study"]["raw_audio_retained"] is False
        tasks = read_parquet(episode.prefix + "meta/tasks.parquet").to_pandas()
        assert list(tasks.index) == dataset.tasks[: len(tasks)]
        with scope(study=reg.study):
            result = verify_episode(episode)
        assert result.ok, result.problems
    first.refresh_from_db()
    assert first.state == State.VERIFIED
    with scope(study=reg.study):
        assert export_recording(first.pk) is None  # idempotent: nothing to do once exported


def test_retried_export_reuses_its_allocation_and_replaces_leftovers(reg, make_capture, stored_objects):
    recording = accepted(reg, make_capture)
    with scope(study=reg.study):
        episode = allocate_episode(recording)
    leftover = episode.prefix + "data/chunk-000/file-000.parquet"
    storages["shards"].save(leftover, ContentFile(b"half-written by a killed worker"))
    storages["shards"].save(episode.prefix + "stray.bin", ContentFile(b"x"))
    recording = export(reg, recording)
    assert recording.state == State.EXPORTED
    with scope(study=reg.study):
        assert Episode.objects.get() == episode and recording.episode.episode_index == episode.episode_index
        assert verify_episode(recording.episode).ok
        assert "interrupted attempt" in " ".join(recording.log.values_list("message", flat=True))
    assert episode.prefix + "stray.bin" not in stored_objects("shards", episode.prefix)


def test_a_live_lease_makes_another_attempt_wait(reg, make_capture):
    """A second delivery of the export while another attempt holds the lease does nothing but wait."""
    recording = accepted(reg, make_capture)
    with scope(study=reg.study):
        claim_export(recording.pk)  # another worker's attempt, still running
        with pytest.raises(LeaseBusy, match=r"another export attempt holds the lease for \d+ s more"):
            export_recording(recording.pk)
        recording.refresh_from_db()
        assert recording.state == State.RUNNING
        assert not Episode.objects.filter(recording=recording).exists()


def test_a_stored_source_that_no_longer_gives_the_allocated_rows_fails_the_export(reg, make_capture):
    """The rows were counted at ingest and the episode's frame range allocated from them: a stored source that
    now exports to other rows (altered in storage) fails the export instead of overlapping the next episode."""
    recording = accepted(reg, make_capture)
    journal = next(f["path"] for f in recording.source_files if f["name"] == "journal.ndjson")
    lines = storages["captures"].open(journal).read().decode().splitlines()
    last_segment = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "segment")
    storages["captures"].delete(journal)
    storages["captures"].save(journal, ContentFile("\n".join(lines[:last_segment] + lines[last_segment + 1:]) + "\n"))
    recording = export(reg, recording)
    assert recording.state == State.FAILED
    assert re.fullmatch(rf"export failed: exported \d+ rows but {recording.summary['rows']} were allocated",
                        recording.reason), recording.reason


def test_export_of_bad_media_fails_with_reason(reg, make_capture):
    recording = accepted(reg, make_capture)
    with scope(study=reg.study):
        camera = next(f for f in recording.source_files if f["name"].startswith("media/"))
        storages["captures"].delete(camera["path"])
        storages["captures"].save(camera["path"], ContentFile(b"not a video"))
    recording = export(reg, recording)
    assert recording.state == State.FAILED and "export failed" in recording.reason
    with scope(study=reg.study):
        retry_export(reg.coordinator, recording)
    assert recording.state == State.QUEUED
