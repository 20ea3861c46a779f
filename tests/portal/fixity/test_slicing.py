"""The schedule spreads the check: with CERES_FIXITY_DAYS x CERES_FIXITY_RUNS_PER_DAY slices, that many consecutive
scheduled runs take the slices in turn and together hash every stored object exactly once and list every orphan
exactly once; a run that stopped does not advance the schedule. Deterministic: the slice of a folder is a hash of
its name, and the runs are counted, not timed."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from django.core.files.storage import storages
from django_scopes import scopes_disabled

from portal.core import storage
from portal.fixity.models import FixityProblem, FixityRun
from portal.fixity.services import runs
from tests.portal.fixity.conftest import replace

# Whole-store runs: on storages of the test's own (see conftest's local_folders).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("local_folders")]


@pytest.fixture
def three_slices(settings):
    settings.CERES_FIXITY_DAYS = 1
    settings.CERES_FIXITY_RUNS_PER_DAY = 3
    assert runs.slice_count() == 3


@pytest.fixture
def hashed(monkeypatch) -> list[tuple[str, str]]:
    """Every object the runs hash: (storage's location or bucket, key)."""
    seen: list[tuple[str, str]] = []
    real = storage.digest

    def digest(target, name):
        seen.append((_where(target), name))
        return real(target, name)

    monkeypatch.setattr(storage, "digest", digest)
    return seen


def _where(target) -> str:
    return getattr(target, "bucket_name", None) or str(target.location)


def test_a_cycle_of_scheduled_runs_checks_every_object_exactly_once(store, three_slices, hashed):
    orphans = [("shards", f"{store.code}/episode-000000/extra.bin"), ("shards", f"{store.code}/loose.bin"),
               ("releases", f"releases/{store.code}/release-0001/stray.json"),
               ("releases", f"datasets/{store.code}/dataset-0007/meta/info.json")]
    for storage_name, name in orphans:
        replace(storage_name, name, b"no record holds me")
    expected = {(_where(storages[name]), key) for name, key in store.objects()} - {
        (_where(storages[name]), key) for name, key in orphans}

    cycle = [runs.run_fixity() for _ in range(3)]
    assert [(run.slice_index, run.slice_count, run.kind) for run in cycle] == [(i, 3, "slice") for i in range(3)]
    ours = Counter(item for item in hashed if any(item[1].startswith(prefix) for _, prefix in store.prefixes()))
    assert set(ours) == expected and set(ours.values()) == {1}  # each object once, none left out
    with scopes_disabled():
        found = Counter((p.storage, p.object_name) for p in FixityProblem.objects.filter(study=store.study))
    assert found == Counter(orphans)  # each orphan reported once in the cycle

    # The next run starts the next cycle.
    assert runs.run_fixity().slice_index == 0


def test_the_slices_part_the_store_whatever_their_number(store, hashed):
    """Every slice count parts the units: the runs of one cycle hash every object once (here 1, 2 and 7 slices)."""
    expected = {(_where(storages[name]), key) for name, key in store.objects()}
    for count in (1, 2, 7):
        hashed.clear()
        for index in range(count):
            runs.run_fixity("test", slice_index=index, count=count, studies=[store.study])
        ours = Counter(hashed)
        assert set(ours) == expected and set(ours.values()) == {1}, count


def test_a_run_that_stopped_leaves_its_slice_to_the_next(store, three_slices, monkeypatch):
    assert runs.run_fixity().slice_index == 0
    real = storage.digest

    def outage(*args):
        raise ConnectionRefusedError("the gateway is down")

    monkeypatch.setattr(storage, "digest", outage)
    with pytest.raises(ConnectionRefusedError):
        for _ in range(3):  # the first slice holding an object stops
            runs.run_fixity()
    stopped = FixityRun.objects.filter(error__startswith="stopped").get()
    monkeypatch.setattr(storage, "digest", real)
    assert runs.run_fixity().slice_index == stopped.slice_index


def test_a_changed_number_of_slices_starts_a_new_cycle(store, three_slices, settings):
    runs.run_fixity()
    assert runs.run_fixity().slice_index == 1
    settings.CERES_FIXITY_RUNS_PER_DAY = 5
    assert (runs.run_fixity().slice_index, runs.slice_count()) == (0, 5)


def test_the_slice_of_a_name_is_stable_and_spread_evenly():
    """A hash of the name (SHA-256, not Python's salted hash): the same on every machine and every run; a year's
    episodes fill the week's 168 slices evenly."""
    assert runs.slice_of("shards:demo/episode-000000/", 168) == int.from_bytes(
        hashlib.sha256(b"shards:demo/episode-000000/").digest()[:8], "big") % 168
    sizes = Counter(runs.slice_of(f"shards:demo/episode-{i:06d}/", 168) for i in range(16800))
    assert len(sizes) == 168 and 60 <= min(sizes.values()) <= max(sizes.values()) <= 140
