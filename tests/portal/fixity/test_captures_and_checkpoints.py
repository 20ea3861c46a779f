"""The fixity check covers the captures storage (each ingested recording's silent source, as ``source_files``
records it) and the audit log's signed checkpoints in the releases storage (each as its database note reproduces
it): a changed, missing or extra capture source object is reported and alerted like a shard's; a changed, missing
or extra checkpoint is reported as a problem of no study, and logged as an error for the site's administrators."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from django.core.files.storage import storages
from django_scopes import scope, scopes_disabled

from portal.audit import checkpoints
from portal.audit.services import record, write_checkpoint
from portal.core import storage
from portal.fixity.models import Alert, FixityProblem
from portal.fixity.services import runs
from portal.recordings.models import Recording
from tests.portal.fixity.conftest import flip_a_byte, replace
from tests.portal.fixity.test_runs import _assert_alerted, problems_of

pytestmark = pytest.mark.django_db
Kind = FixityProblem.Kind


def _source_object(store) -> tuple[Recording, str]:
    with scope(study=store.study):
        recording = Recording.objects.filter(source_files__isnull=False).exclude(source_files=[]).order_by("pk")[0]
    return recording, sorted(item["path"] for item in recording.source_files)[0]


def test_a_changed_capture_source_is_reported_and_alerted(store, sent_tasks, client,
                                                          django_capture_on_commit_callbacks):
    recording, name = _source_object(store)
    original = storage.digest(storages["captures"], name)
    flip_a_byte("captures", name)
    with django_capture_on_commit_callbacks(execute=True):
        run = store.run()
    new_sha, size = storage.digest(storages["captures"], name)
    assert new_sha != original[0] and size == original[1]
    assert problems_of(run) == [{
        "kind": Kind.CHANGED, "storage": "captures", "object": name,
        "detail": f"SHA-256 {new_sha}, {size} bytes; recording {recording.uid} records SHA-256 {original[0]}, "
                  f"{size} bytes"}]
    _assert_alerted(store, run, name, sent_tasks, client)


def test_a_missing_capture_source_is_reported_and_alerted(store, sent_tasks, client,
                                                          django_capture_on_commit_callbacks):
    recording, name = _source_object(store)
    storages["captures"].delete(name)
    with django_capture_on_commit_callbacks(execute=True):
        run = store.run()
    assert problems_of(run) == [{"kind": Kind.MISSING, "storage": "captures", "object": name,
                                 "detail": f"recording {recording.uid} records it; it is not in storage"}]
    _assert_alerted(store, run, name, sent_tasks, client)


def test_an_extra_capture_object_is_reported_and_alerted(store, sent_tasks, client,
                                                         django_capture_on_commit_callbacks):
    recording, _ = _source_object(store)
    name = f"{store.code}/{recording.uid}/source/planted.bin"
    replace("captures", name, b"put here by hand")
    with django_capture_on_commit_callbacks(execute=True):
        run = store.run()
    assert problems_of(run) == [{"kind": Kind.ORPHAN, "storage": "captures", "object": name,
                                 "detail": f"in the folder of recording {recording.uid}, which does not record it"}]
    _assert_alerted(store, run, name, sent_tasks, client)


# --- the audit log's checkpoints -----------------------------------------------------------------------------

NOVEMBER = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DECEMBER = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


@pytest.fixture
def noted(local_folders) -> list[str]:
    """Two signed checkpoints, in two month folders, and their database notes; a whole-store run on storages of the
    test's own finds nothing wrong with them."""
    names = []
    for when in (NOVEMBER, DECEMBER):
        record("tester", "test.event", None)
        names.append(write_checkpoint(now=when).name)
    clean = runs.run_fixity("test", full=True)
    assert clean.succeeded and clean.problem_count == 0
    assert clean.objects_checked == 2
    return names


def _checkpoint_problems(run) -> list[dict]:
    with scopes_disabled():
        return [problem.as_dict() for problem in run.problems.filter(object_name__startswith=checkpoints.prefix())
                .order_by("pk")]


def test_a_changed_checkpoint_is_reported(noted, caplog):
    name = noted[0]
    original = storage.digest(storages["releases"], name)
    flip_a_byte("releases", name)
    new_sha, size = storage.digest(storages["releases"], name)
    with caplog.at_level(logging.ERROR, logger="portal.fixity.services.runs"):
        run = runs.run_fixity("test", full=True)
    assert _checkpoint_problems(run) == [{
        "kind": Kind.CHANGED, "storage": "releases", "object": name,
        "detail": f"SHA-256 {new_sha}, {size} bytes; audit checkpoints of 2026-11 records SHA-256 {original[0]}, "
                  f"{size} bytes"}]
    with scopes_disabled():
        assert run.problem_count == 1 and FixityProblem.objects.get(run=run).study_id is None
    assert f"1 problems outside every study (the fixity page lists them), first: changed {name}" in caplog.text
    with scopes_disabled():
        assert not Alert.objects.exists()  # no study's people to alert


def test_a_missing_checkpoint_is_reported(noted, caplog):
    name = noted[1]
    storages["releases"].delete(name)
    with caplog.at_level(logging.ERROR, logger="portal.fixity.services.runs"):
        run = runs.run_fixity("test", full=True)
    assert _checkpoint_problems(run) == [{"kind": Kind.MISSING, "storage": "releases", "object": name,
                                          "detail": "audit checkpoints of 2026-12 records it; it is not in storage"}]
    assert f"first: missing {name}" in caplog.text


@pytest.mark.parametrize("folder", ["2026-12", "2027-01"], ids=["in-a-noted-month", "in-a-month-with-no-note"])
def test_an_extra_checkpoint_is_reported(noted, folder, caplog):
    """A checkpoint object the database has no note of (the note deleted, or an object planted)."""
    name = f"{checkpoints.prefix()}{folder}/20261201T120000.000000Z-000000000099.json"
    replace("releases", name, b"{}")
    with caplog.at_level(logging.ERROR, logger="portal.fixity.services.runs"):
        run = runs.run_fixity("test", full=True)
    assert _checkpoint_problems(run) == [{
        "kind": Kind.ORPHAN, "storage": "releases", "object": name,
        "detail": f"in the folder of audit checkpoints of {folder}, which does not record it"}]
    assert f"first: orphan {name}" in caplog.text


def test_the_captures_inbox_is_the_inbox_polls_not_an_orphan(local_folders):
    """On S3 the inbox is ``inbox/<study>/`` of the captures bucket, beside the study folders: the poll ingests and
    removes what waits there; a whole-store run does not take it for a study folder of no study."""
    replace("captures", "inbox/demo/waiting.zip", b"PK\x05\x06" + b"\0" * 18)
    replace("captures", "nostudy/planted.bin", b"put here by hand")  # a folder of no study still is one
    run = runs.run_fixity("test", full=True)
    with scopes_disabled():
        assert [(p.kind, p.storage, p.object_name) for p in run.problems.all()] == [
            (Kind.ORPHAN, "captures", "nostudy/planted.bin")]
