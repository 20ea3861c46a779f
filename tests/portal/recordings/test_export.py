"""Export into the shards storage, allocation reuse on retry, verification against the receipt."""

from __future__ import annotations

import hashlib
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
from portal.fixity.models import Alert
from portal.recordings.models import Episode, Recording, StudyDataset
from portal.recordings.services.export import allocate_episode, claim_export, export_recording, retry_export
from portal.recordings.services.ingest import ingest_path
from portal.recordings.services.verification import reverify_all, verify_episode

pytestmark = pytest.mark.django_db

State = Recording.State


def accepted(reg, make_capture, **kwargs) -> Recording:
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(), **kwargs))
    assert recording.state == State.QUEUED, recording.reason
    return recording


def export(reg, recording) -> Recording:
    with scope(study=reg.study):
        export_recording(recording.pk)
        recording.refresh_from_db()
    return recording


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


def test_tampered_shard_raises_an_alert(reg, make_capture):
    recording = export(reg, accepted(reg, make_capture))
    with scope(study=reg.study):
        episode = recording.episode
        victim = episode.prefix + "meta/info.json"
        storages["shards"].delete(victim)
        storages["shards"].save(victim, ContentFile(b"{}"))
        result = verify_episode(episode)
        episode.refresh_from_db()
        assert not result.ok and any("meta/info.json" in p for p in result.problems)
        assert episode.receipt_status == Episode.Receipt.MISMATCH
        assert Alert.objects.filter(episode=episode, resolved_at__isnull=True).exists()


def replace_object(name: str, data: bytes) -> None:
    shards = storages["shards"]
    shards.delete(name)
    shards.save(name, ContentFile(data))


def test_a_truncated_object_is_named_by_its_length_and_digest(reg, make_capture):
    recording = export(reg, accepted(reg, make_capture))
    with scope(study=reg.study):
        episode = recording.episode
        name = episode.prefix + "meta/info.json"
        original = storages["shards"].open(name).read()
        replace_object(name, original[:-1])
        result = verify_episode(episode)
    assert result.problems == [
        f"meta/info.json: {len(original) - 1} bytes, receipt says {len(original)}",
        f"meta/info.json: SHA-256 {hashlib.sha256(original[:-1]).hexdigest()} does not match the receipt",
    ]


def test_a_receipt_rewritten_to_match_altered_objects_is_caught_by_its_recorded_digest(reg, make_capture):
    """The receipt's own digest was recorded at export: a shard altered together with its receipt (every
    artefact's digest matches the new receipt) still fails verification, naming the receipt."""
    recording = export(reg, accepted(reg, make_capture))
    with scope(study=reg.study):
        episode = recording.episode
        info = episode.prefix + "meta/info.json"
        altered = storages["shards"].open(info).read().replace(b'"fps"', b'"fps" ', 1)
        replace_object(info, altered)
        receipt = json.loads(storages["shards"].open(episode.prefix + RECEIPT).read())
        entry = next(a for a in receipt["artefacts"] if a["path"] == "meta/info.json")
        entry.update(sha256=hashlib.sha256(altered).hexdigest(), bytes=len(altered))
        forged = json.dumps(receipt).encode()
        replace_object(episode.prefix + RECEIPT, forged)
        result = verify_episode(episode)
    assert result.problems == [f"{RECEIPT}: SHA-256 {hashlib.sha256(forged).hexdigest()} differs from the one "
                               "recorded at export"]


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


def test_missing_or_garbled_receipt_is_a_mismatch(reg, make_capture):
    recording = export(reg, accepted(reg, make_capture))
    shards = storages["shards"]
    with scope(study=reg.study):
        episode = recording.episode
        shards.delete(episode.prefix + RECEIPT)
        shards.save(episode.prefix + RECEIPT, ContentFile(b"not json"))
        garbled = verify_episode(episode)
        shards.delete(episode.prefix + RECEIPT)
        missing = verify_episode(episode)
        assert Alert.objects.filter(episode=episode).count() == 2
    assert any("unreadable" in p for p in garbled.problems)
    assert f"{RECEIPT}: missing" in missing.problems
    assert any("extra object not in the receipt" in p for p in missing.problems)


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


def test_fixity_schedule_queues_every_exported_shard(reg, make_capture, sent_tasks):
    exported = export(reg, accepted(reg, make_capture))
    pending = accepted(reg, make_capture)
    with scope(study=reg.study):
        allocate_episode(pending)
    sent_tasks.clear()
    assert reverify_all() == 1
    assert sent_tasks == [("recordings.verify_episode", (exported.episode.pk,))]
