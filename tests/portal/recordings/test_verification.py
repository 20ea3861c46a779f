"""Verification of a stored shard against its receipt (services/verification.py): altered, truncated, forged or
missing objects are named and raise an alert; the schedule queues every exported shard."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django_scopes import scope

from exporter.receipt import RECEIPT
from portal.core import storage
from portal.fixity.models import Alert
from portal.recordings.models import Episode
from portal.recordings.services.export import allocate_episode
from portal.recordings.services.verification import reverify_all, verify_episode
from tests.portal.recordings.conftest import accepted, export

pytestmark = pytest.mark.django_db


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


def test_fixity_schedule_queues_every_exported_shard(reg, make_capture, sent_tasks):
    exported = export(reg, accepted(reg, make_capture))
    pending = accepted(reg, make_capture)
    with scope(study=reg.study):
        allocate_episode(pending)
    sent_tasks.clear()
    assert reverify_all() == 1
    assert sent_tasks == [("recordings.verify_episode", (exported.episode.pk,))]


def test_a_matching_verification_records_each_objects_md5_and_a_mismatch_clears_them(reg, make_capture, settings):
    """Beside the SHA-256 it checks, verification keeps what it read of every object (MD5, length, the store's
    ETag): what lets a release copy an unchanged object without reading it again."""
    recording = export(reg, accepted(reg, make_capture))
    shards = storages["shards"]
    with scope(study=reg.study):
        episode = recording.episode
        assert verify_episode(episode).ok
        episode.refresh_from_db()
        recorded = episode.stored_checksums
        assert set(recorded) == {entry["path"] for entry in episode.shard_files} | {RECEIPT}
        for path, seen in recorded.items():
            data = shards.open(episode.prefix + path).read()
            md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
            etag = md5 if settings.STORAGE_BACKEND == "s3" else ""  # a single-part object's ETag is its MD5
            assert seen == storage.seal(episode.prefix + path, {"sha256": hashlib.sha256(data).hexdigest(),
                                                                 "md5": md5, "size": len(data), "etag": etag}), path
        replace_object(episode.prefix + "meta/info.json", b"{}")
        assert not verify_episode(episode).ok
        episode.refresh_from_db()
        assert episode.stored_checksums == {}
