"""Requests made before the manifest's names were frozen take today's values (what their manifests were built
from until now): the study's code, the requester's and each officer's username, each episode's capture id; a
request already submitted takes its study's number of approvals, a draft takes it when it is submitted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("releases", "0003_superseding_releases")]
AFTER = [("releases", "0004_frozen_manifest_names")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_existing_requests_items_and_approvals_are_frozen_with_todays_names():
    old = _migrate(BEFORE)
    try:
        User, Study, Recording, Episode, Request, Item, Approval = (old.get_model(*label.split(".")) for label in (
            "auth.User", "studies.Study", "recordings.Recording", "recordings.Episode", "releases.ReleaseRequest",
            "releases.ReleaseItem", "releases.Approval"))
        study = Study._base_manager.create(code="mig", title="Migrated", approvals_required=3)
        coordinator = User._base_manager.create(username="coord-mig")
        officer = User._base_manager.create(username="ethics-mig")
        recording = Recording._base_manager.create(study=study, via="command", original_name="a.zip",
                                                   capture_id="cap-0001")
        episode = Episode._base_manager.create(study=study, recording=recording, episode_index=0, from_index=0,
                                               length=1, task_count=1)
        made = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
        submitted, _draft = (Request._base_manager.create(
            study=study, number=number, state=state, purpose="p", requested_by=coordinator, manifest_sha256="0" * 64,
            episode_count=1) for number, state in ((1, "awaiting_approval"), (2, "draft")))
        Item._base_manager.create(study=study, request=submitted, episode=episode, episode_index=0,
                                  receipt_sha256="1" * 64, files=[])
        Approval._base_manager.create(study=study, request=submitted, officer=officer, approved_at=made,
                                      manifest_sha256="0" * 64)

        new = _migrate(AFTER)
        Request, Item, Approval = (new.get_model("releases", name) for name in ("ReleaseRequest", "ReleaseItem",
                                                                              "Approval"))
        assert list(Request._base_manager.order_by("number").values_list(
            "study_code", "requested_by_name", "approvals_required")) == [("mig", "coord-mig", 3),
                                                                          ("mig", "coord-mig", None)]
        assert list(Item._base_manager.values_list("capture_id", flat=True)) == ["cap-0001"]
        assert list(Approval._base_manager.values_list("officer_name", flat=True)) == ["ethics-mig"]
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
