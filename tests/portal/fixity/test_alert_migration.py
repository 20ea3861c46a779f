"""The receipt-mismatch alerts of recordings become portal.fixity's general alerts: a database migrated from before
keeps every alert with its study, episode, message and time, open or resolved as it was."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

# The registry as it is now (its studies hold every column today's table has), the alerts as they were.
BEFORE = [("studies", "0006_study_carry_over_approvals"), ("recordings", "0004_list_indexes"), ("fixity", None)]
AFTER = [("recordings", "0005_delete_alert"), ("fixity", "0002_alerts_from_recordings")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state([target for target in targets if target[1] is not None]).apps


def test_existing_alerts_are_carried_over():
    old = _migrate(BEFORE)
    try:
        Study, Recording, Episode, Alert = (old.get_model(*label.split(".")) for label in (
            "studies.Study", "recordings.Recording", "recordings.Episode", "recordings.Alert"))
        study = Study._base_manager.create(code="mig", title="Migrated")
        recording = Recording._base_manager.create(study=study, via="command", original_name="a.zip")
        episode = Episode._base_manager.create(study=study, recording=recording, episode_index=0, from_index=0,
                                               length=1, task_count=1)
        made = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
        opened = Alert._base_manager.create(study=study, episode=episode, message="mig/episode-000000/: bad")
        Alert._base_manager.filter(pk=opened.pk).update(created_at=made)
        Alert._base_manager.create(study=study, episode=episode, message="an old one", resolved_at=made)

        new = _migrate(AFTER)
        rows = list(new.get_model("fixity", "Alert")._base_manager.order_by("pk").values(
            "study_id", "episode_id", "kind", "state", "message", "created_at", "resolved_at", "resolved_note"))
        assert rows == [
            {"study_id": study.pk, "episode_id": episode.pk, "kind": "receipt_mismatch", "state": "open",
             "message": "mig/episode-000000/: bad", "created_at": made, "resolved_at": None, "resolved_note": ""},
            {"study_id": study.pk, "episode_id": episode.pk, "kind": "receipt_mismatch", "state": "resolved",
             "message": "an old one", "created_at": rows[1]["created_at"], "resolved_at": made,
             "resolved_note": "resolved before alerts had notes"},
        ]
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
