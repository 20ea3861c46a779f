"""The shard upload is crash-safe: the receipt is stored last, once every artefact it lists is in place, so a
shard with a receipt is whole; an outage between any two objects leaves no receipt, and the retry replaces
what the interrupted attempt left. Read from a storage that journals every object it stores."""

from __future__ import annotations

import json

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.receipt import RECEIPT
from portal.recordings import tasks
from portal.recordings.models import Episode, Recording
from portal.recordings.services.export import export_recording
from portal.recordings.services.ingest import ingest_path
from portal.recordings.services.verification import verify_episode

pytestmark = pytest.mark.django_db



@pytest.fixture
def journaled_shards(settings, tmp_path):
    def configure(**faults):
        settings.STORAGES = {**settings.STORAGES, "shards": {
            "BACKEND": "tests.portal.recordings.journaled_storage.JournaledStorage",
            "OPTIONS": {"location": str(tmp_path / "journaled-shards"), **faults}}}
        return storages["shards"]

    return configure


def queued(reg, make_capture) -> Recording:
    with scope(study=reg.study):
        recording = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims()))
    assert recording.state == Recording.State.QUEUED, recording.reason
    return recording


def receipt_artefacts(shards, episode: Episode) -> list[str]:
    return [a["path"] for a in json.loads(shards.open(episode.prefix + RECEIPT).read())["artefacts"]]


def test_the_receipt_is_stored_last_once_every_artefact_is_in_place(reg, make_capture, journaled_shards):
    shards = journaled_shards()
    recording = queued(reg, make_capture)
    with scope(study=reg.study):
        export_recording(recording.pk)
        episode = Episode.objects.get(recording=recording)
    prefix = episode.prefix
    artefacts = receipt_artefacts(shards, episode)
    assert len(artefacts) == 8 and artefacts[-1].endswith(".mp4"), artefacts  # camera and task specification
    assert [save.name for save in shards.saves] == [prefix + name for name in [*artefacts, RECEIPT]]
    for number, save in enumerate(shards.saves):
        assert save.present == {prefix + name for name in artefacts[:number]}, save.name


# The outage strikes before the first artefact, one in the middle, the last one (the video) and the receipt.
@pytest.mark.parametrize("failing", [0, 3, 7, 8])
def test_an_outage_between_objects_leaves_no_receipt_and_the_retry_completes(reg, make_capture, journaled_shards,
                                                                            failing):
    shards = journaled_shards(fail_once_at=failing)
    recording = queued(reg, make_capture)
    tasks.export_recording.apply(args=[recording.pk])  # in-process: the outage, a retry, the export
    with scope(study=reg.study):
        episode = Episode.objects.get(recording=recording)
        log = list(recording.log.values_list("message", flat=True))
    prefix = episode.prefix
    order = [prefix + name for name in [*receipt_artefacts(shards, episode), RECEIPT]]
    # When the outage struck, the objects before it were stored and the receipt was not.
    assert [save.failed for save in shards.saves].index(True) == failing
    assert shards.saves[failing].name == order[failing]
    assert shards.saves[failing].present == set(order[:failing])
    assert prefix + RECEIPT not in shards.saves[failing].present
    assert f"storage error, retrying in 2 s: storage outage injected before {order[failing]}" in log
    if failing:
        assert f"removed {failing} objects left by an interrupted attempt under {prefix}" in log
    # The retry stored the whole shard again, receipt last.
    assert [save.name for save in shards.saves[failing + 1:]] == order
    recording.refresh_from_db()
    assert recording.state == Recording.State.EXPORTED, recording.reason
    with scope(study=reg.study):
        assert verify_episode(episode).ok


def test_an_object_stored_wrong_fails_the_export_before_the_receipt(reg, make_capture, journaled_shards):
    """Every object is re-hashed from the storage after it is stored: one that came back different stops the
    upload there, and the export fails visibly instead of publishing a receipt for bytes it never wrote."""
    shards = journaled_shards(corrupt_once_at=2)
    recording = queued(reg, make_capture)
    tasks.export_recording.apply(args=[recording.pk])
    recording.refresh_from_db()
    third = shards.saves[2].name
    assert recording.state == Recording.State.FAILED
    assert recording.reason == f"internal error: OSError('{third}: stored object does not match the uploaded file')"
    assert len(shards.saves) == 3 and not third.endswith(RECEIPT)  # nothing stored after it, no receipt
