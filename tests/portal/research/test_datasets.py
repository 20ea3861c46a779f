"""One-dataset downloads: assembled from released episodes with a hole, renumbered with provenance, signed,
every object checked; identical selections reuse the stored dataset; a bad object or an outage is visible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import ConnectionError as BotoConnectionError
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django_scopes import scope

from exporter.cli import main as exporter_main
from exporter.release import DATASET_MANIFEST, manifest_files
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.core.signing import public_key_pem
from portal.research.exceptions import ResearchError
from portal.research.models import Dataset, DatasetRequester
from portal.research.services import catalogue, datasets, links
from tests.portal.research.linkfetch import fetch

pytestmark = pytest.mark.django_db
State = Dataset.State


def items_of(request, *indexes):
    with scope(study=request.study):
        return [item for item in catalogue.released_items().select_related("request").order_by("episode_index")
                if item.request_id == request.pk and item.episode_index in indexes]


def build(dataset: Dataset) -> Dataset:
    with scope(study=dataset.study):
        datasets.build_dataset(dataset.pk)
        return Dataset.objects.select_related("study").get(pk=dataset.pk)


def pull_with_links(user, dataset, client, folder: Path) -> Path:
    with scope(study=dataset.study):
        for link in links.dataset_links(user, dataset, via="api"):
            status, body = fetch(client, link.url)
            assert status == 200, link.path
            (folder / link.path).parent.mkdir(parents=True, exist_ok=True)
            (folder / link.path).write_bytes(body)
    return folder


def test_episodes_with_a_hole_become_one_signed_dataset_that_verifies(released, researcher, client, tmp_path,
                                                                      sent_tasks, capsys,
                                                                      django_capture_on_commit_callbacks):
    with scope(study=released.study), django_capture_on_commit_callbacks(execute=True):
        dataset, reused = datasets.request_dataset(researcher, released.study, items_of(released, 0, 2))
    assert not reused and dataset.state == State.QUEUED and dataset.dataset_id == "dataset-0001"
    assert ("research.build_dataset", (dataset.pk,)) in sent_tasks
    ready = build(dataset)
    assert ready.state == State.READY and ready.phase == ""

    names = storage.walk(storages["releases"], ready.prefix)
    manifest = json.loads(storages["releases"].open(ready.prefix + DATASET_MANIFEST).read())
    assert len(names) == ready.files_total == len(manifest_files(manifest)) + 2
    assert [(e["episode_index"], e["source_release"], e["source_episode_index"]) for e in
            manifest["dataset"]["episodes"]] == [(0, "release-0001", 0), (1, "release-0001", 2)]

    folder = pull_with_links(researcher, ready, client, tmp_path / "dataset")
    key = tmp_path / "key.pem"
    key.write_text(public_key_pem())
    assert exporter_main(["verify-release", str(folder), "--public-key", str(key)]) == 0
    assert "dataset dataset-0001 of study" in capsys.readouterr().out
    info = json.loads((folder / "meta/info.json").read_text())
    assembly = json.loads((folder / "ceres/assembly.json").read_text())
    assert info["total_episodes"] == 2
    assert [(e["episode_index"], e["source_episode_index"]) for e in assembly["episodes"]] == [(0, 0), (1, 2)]
    actions = list(AuditEvent.objects.filter(target_type="research.dataset").exclude(action="research.link_issued")
                   .order_by("seq").values_list("action", flat=True))
    assert actions == ["research.dataset_requested", "research.dataset_build_started", "research.dataset_signed",
                       "research.dataset_ready"]


def test_an_identical_selection_reuses_the_dataset_for_anyone(released, make_released, researcher, make_researcher,
                                                              sent_tasks, django_capture_on_commit_callbacks):
    with scope(study=released.study), django_capture_on_commit_callbacks(execute=True):
        first, _ = datasets.request_dataset(researcher, released.study, items_of(released, 1, 2))
    build(first)
    other = make_researcher("other")
    with scope(study=released.study), django_capture_on_commit_callbacks(execute=True):
        second, reused = datasets.request_dataset(other, released.study, items_of(released, 2, 1))
        assert reused and second.pk == first.pk
        assert set(DatasetRequester.objects.filter(dataset=first).values_list("user__username", flat=True)) == {
            researcher.get_username(), other.get_username()}
    assert [name for name, _ in sent_tasks].count("research.build_dataset") == 1
    # The same episodes from another release are another dataset: it names its source releases, and is given
    # out only while they are published (a superseded release's dataset refuses its links).
    again = make_released([item.episode for item in items_of(released, 1)])
    with scope(study=released.study), django_capture_on_commit_callbacks(execute=True):
        third, reused = datasets.request_dataset(other, released.study, items_of(again, 1) + items_of(released, 2))
    assert not reused and third.pk != first.pk
    assert [name for name, _ in sent_tasks].count("research.build_dataset") == 2


def test_a_dataset_holds_at_most_the_configured_number_of_episodes(released, researcher, settings):
    settings.CERES_DATASET_MAX_EPISODES = 2
    with scope(study=released.study), pytest.raises(ResearchError, match="at most 2 episodes; 3 were chosen"):
        datasets.request_dataset(researcher, released.study, items_of(released, 0, 1, 2))
    assert not Dataset.objects.exists()


def test_a_released_object_that_changed_fails_the_build_naming_it_and_asking_again_retries(released, researcher,
                                                                                         sent_tasks):
    victim = released.prefix + "episode-000001/meta/info.json"
    original = storages["releases"].open(victim).read()
    storage.put(storages["releases"], victim, ContentFile(original.replace(b"v3.0", b"v3.9")))
    with scope(study=released.study):
        dataset, _ = datasets.request_dataset(researcher, released.study, items_of(released, 0, 1))
    failed = build(dataset)
    assert failed.state == State.FAILED
    assert failed.last_error == f"build failed: {victim}: the stored object does not match its receipt"
    assert not storage.walk(storages["releases"], failed.prefix)

    storage.put(storages["releases"], victim, ContentFile(original))
    with scope(study=released.study):
        again, reused = datasets.request_dataset(researcher, released.study, items_of(released, 0, 1))
    assert reused and again.state == State.QUEUED
    assert build(again).state == State.READY


def test_an_outage_mid_upload_keeps_what_is_in_place_and_the_next_attempt_completes(released, researcher,
                                                                                    monkeypatch):
    with scope(study=released.study):
        dataset, _ = datasets.request_dataset(researcher, released.study, items_of(released, 0, 1, 2))
    real_put, stored = storage.put_checked, []

    def failing_after_three(target, name, *args):
        if len(stored) == 3:
            raise BotoConnectionError(error="the gateway went away")
        real_put(target, name, *args)
        stored.append(name)

    monkeypatch.setattr(storage, "put_checked", failing_after_three)
    with scope(study=dataset.study):
        with pytest.raises(BotoConnectionError):
            datasets.build_dataset(dataset.pk)
        assert Dataset.objects.get(pk=dataset.pk).state == State.BUILDING
        datasets.note_retry(dataset, BotoConnectionError(error="down"), 2)  # what the task does before its retry
        assert "storage error, retrying in 2 s" in Dataset.objects.get(pk=dataset.pk).last_error
    assert len(storage.walk(storages["releases"], dataset.prefix)) == 3

    stored.clear()
    monkeypatch.setattr(storage, "put_checked", lambda target, name, *args: (real_put(target, name, *args),
                                                                             stored.append(name)))
    ready = build(dataset)
    assert ready.state == State.READY and ready.attempts == 2
    assert len(stored) == ready.files_total - 3  # the three objects already in place were kept


def test_a_queued_dataset_says_queued_until_a_worker_counts_the_files(released, researcher, client, sent_tasks,
                                                                      django_capture_on_commit_callbacks):
    with scope(study=released.study), django_capture_on_commit_callbacks(execute=True):
        dataset, _ = datasets.request_dataset(researcher, released.study, items_of(released, 0, 1))
    client.force_login(researcher)
    page = client.get(f"/studies/{released.study.code}/datasets/{dataset.number}/").content.decode()
    assert '<span id="phase">Queued, waiting for a worker</span><span id="counts" hidden>' in page
    build(dataset)
    ready = client.get(f"/studies/{released.study.code}/datasets/{dataset.number}/").content.decode()
    assert "Queued" not in ready and 'id="counts"' not in ready
