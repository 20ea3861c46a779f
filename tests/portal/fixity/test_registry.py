"""The registry of expected objects takes what a later feature declares without touching the sources it amends: an
episode withdrawn from a published release (its folder must be empty now) and a tombstone left beside the release's
files. A unit is a folder with one of expected, claimed or absent."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages
from django_scopes import scopes_disabled

from exporter.receipt import bytes_digest
from portal.core import storage
from portal.fixity import registry
from portal.fixity.models import FixityProblem
from tests.portal.fixity.conftest import replace

pytestmark = pytest.mark.django_db
TOMBSTONE = b'{"withdrawn": [1], "at": "2026-12-01T10:00:00Z", "why": "consent withdrawn"}\n'


def problems(run) -> list[tuple[str, str, str]]:
    with scopes_disabled():
        return list(FixityProblem.objects.filter(run=run).order_by("pk").values_list("kind", "object_name", "detail"))


@pytest.fixture
def withdrawal(store):
    """What a withdrawal of release-0001's episode 1 declares: the folder it emptied, and its tombstone."""
    release = f"releases/{store.code}/release-0001/"

    def declared(studies):
        if studies is not None and store.study not in studies:
            return
        yield registry.Unit("releases", f"{release}episode-000001/", store.study.pk, "release-0001 episode 1",
                            absent="withdrawn on 2026-12-01: consent withdrawn")
        yield registry.Unit("releases", release, store.study.pk, "the withdrawal's tombstone",
                            expected=lambda: [registry.Expected(f"{release}tombstone.json", *bytes_digest(TOMBSTONE))])

    registry.source(declared)
    yield release
    registry.unregister(declared)


def test_a_withdrawn_episode_and_its_tombstone_are_accounted_for(store):
    release = f"releases/{store.code}/release-0001/"
    removed = storage.walk(storages["releases"], f"{release}episode-000001/")
    for name in removed:
        storages["releases"].delete(name)
    replace("releases", f"{release}tombstone.json", TOMBSTONE)
    # Without the withdrawal's declarations: the removed files are missing, the tombstone an orphan.
    before = problems(store.run())
    assert sorted(name for kind, name, _ in before if kind == FixityProblem.Kind.MISSING) == sorted(removed)
    assert [(kind, name) for kind, name, _ in before if kind != FixityProblem.Kind.MISSING] == [
        (FixityProblem.Kind.ORPHAN, f"{release}tombstone.json")]


def test_declared_units_amend_the_release_source(store, withdrawal):
    release = withdrawal
    removed = storage.walk(storages["releases"], f"{release}episode-000001/")
    for name in removed:
        storages["releases"].delete(name)
    replace("releases", f"{release}tombstone.json", TOMBSTONE)
    assert problems(store.run()) == []

    left = f"{release}episode-000001/meta/info.json"
    replace("releases", left, b"{}")  # the removal missed one
    replace("releases", f"{release}tombstone.json", TOMBSTONE.replace(b"[1]", b"[2]"))
    found = {kind: (name, detail) for kind, name, detail in problems(store.run())}
    assert found.keys() == {FixityProblem.Kind.ORPHAN, FixityProblem.Kind.CHANGED}
    assert found[FixityProblem.Kind.ORPHAN] == (
        left, "release-0001 episode 1: nothing may be here (withdrawn on 2026-12-01: consent withdrawn)")
    name, detail = found[FixityProblem.Kind.CHANGED]
    assert name == f"{release}tombstone.json" and "the withdrawal's tombstone records SHA-256" in detail


def test_a_unit_is_a_folder_with_exactly_one_expectation():
    with pytest.raises(ValueError, match="does not end in '/'"):
        registry.Unit("shards", "demo/episode-000000", 1, "x", claimed=True)
    with pytest.raises(ValueError, match="exactly one of expected, claimed or absent"):
        registry.Unit("shards", "demo/episode-000000/", 1, "x", claimed=True, absent="gone")
    with pytest.raises(ValueError, match="exactly one"):
        registry.Unit("shards", "demo/episode-000000/", 1, "x")
