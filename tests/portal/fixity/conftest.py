"""Fixtures for the fixity check: the research fixtures (registry, storage per test or the S3 gateway, verified
episodes, a published release, a granted researcher), and a study holding all three kinds of stored object: shards,
a published release and a ready one-dataset download, with people who have email addresses."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django_scopes import scope

from portal.core import storage
from portal.fixity.services import runs
from portal.research.models import Dataset
from portal.research.services import catalogue, datasets
from tests.portal.research import conftest as research

(make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker, team,
 verified_factory, verified, make_request, agreement, make_released, make_researcher, researcher) = (
    research.make_capture, research.make_registry, research.private_storage, research.reg, research.sent_tasks,
    research.stored_objects, research.unique_code, research.worker, research.team, research.verified_factory,
    research.verified, research.make_request, research.agreement, research.make_released,
    research.make_researcher, research.researcher)


@pytest.fixture
def local_folders(settings, tmp_path):
    """Storages of the test's own, on local folders even where the run uses the S3 gateway: for the tests that
    check the whole store, which on the shared buckets would walk every object other tests ever left there. The
    study-limited tests check the same code on S3."""
    if settings.STORAGE_BACKEND != "local":
        settings.STORAGES = {**settings.STORAGES, **{
            name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
                   "OPTIONS": {"location": str(tmp_path / "whole-store" / name)}}
            for name in settings.STORAGE_NAMES}}


@dataclass
class Store:
    """A study with two exported episodes, both published in release-0001, and one ready one-dataset download."""

    team: object
    release: object
    dataset: Dataset
    researcher: object

    @property
    def study(self):
        return self.team.study

    @property
    def code(self) -> str:
        return self.study.code

    def prefixes(self) -> list[tuple[str, str]]:
        """Where the study's objects are: its capture sources, its shards, its releases and its datasets."""
        return [("captures", f"{self.code}/"), ("shards", f"{self.code}/"), ("releases", f"releases/{self.code}/"),
                ("releases", f"datasets/{self.code}/")]

    def objects(self) -> set[tuple[str, str]]:
        """Every object of the study in storage, listed through the storages themselves."""
        return {(name, key) for name, prefix in self.prefixes() for key in storage.walk(storages[name], prefix)}

    def run(self, **options):
        """A full pass over this study's folders (on S3 the buckets hold other tests' objects too)."""
        return runs.run_fixity("test", full=True, studies=[self.study], **options)


@pytest.fixture
def store(team, make_released, verified, researcher) -> Store:
    team.reg.coordinator.email = "coordinator@example.org"
    team.reg.ethics.email = "ethics@example.org"
    for user in (team.reg.coordinator, team.reg.ethics):
        user.save(update_fields=["email"])
    release = make_released(verified(2))
    with scope(study=team.study):
        items = list(catalogue.released_items().filter(request=release).order_by("episode_index"))
        dataset, _ = datasets.request_dataset(researcher, team.study, items)
        datasets.build_dataset(dataset.pk)
        dataset = Dataset.objects.select_related("study").get(pk=dataset.pk)
    assert dataset.state == Dataset.State.READY
    return Store(team, release, dataset, researcher)


def replace(storage_name: str, name: str, data: bytes) -> None:
    """Store ``data`` under ``name`` in place of what is there."""
    target = storages[storage_name]
    if target.exists(name):
        target.delete(name)
    target.save(name, ContentFile(data))


def flip_a_byte(storage_name: str, name: str) -> bytes:
    """Change one byte of a stored object in the middle (same length); returns the new bytes."""
    data = bytearray(storages[storage_name].open(name, "rb").read())
    data[len(data) // 2] ^= 0x01
    replace(storage_name, name, bytes(data))
    return bytes(data)
