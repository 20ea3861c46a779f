"""A database migrated from before researcher grants had to end: a researcher grant without an end gets the
longest term a decision can give from when it was granted, each researcher grant is linked to the granted access
request whose end it carries, other roles stay open-ended, and from then on the database refuses an open-ended
researcher grant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("access", "0001_initial"), ("research", "0002_tombstone_bytes")]
AFTER = [("access", "0002_researcher_grant_expiry")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state([target for target in targets if target[1] is not None]).apps


def test_open_researcher_grants_get_an_end_and_grants_name_their_decision():
    old = _migrate(BEFORE)
    try:
        User, Study, Agreement, Acceptance, AccessRequest, RoleGrant = (old.get_model(*label.split(".")) for label in (
            "auth.User",
            "studies.Study", "studies.DataUseAgreement", "research.AgreementAcceptance", "research.AccessRequest",
            "access.RoleGrant"))
        study = Study._base_manager.create(code="mig", title="Migrated", status="active")
        steward, opened, asked, coordinator = (User._base_manager.create(username=name) for name in (
            "steward", "opened", "asked", "coordinator"))
        agreement = Agreement._base_manager.create(study=study, version=1, text="t", sha256="0" * 64,
                                                   created_by=steward)
        accepted = Acceptance._base_manager.create(study=study, user=asked, agreement=agreement, version=1,
                                                   sha256="0" * 64)
        until = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
        decision = AccessRequest._base_manager.create(study=study, researcher=asked, purpose="p", acceptance=accepted,
                                                      state="granted", decided_by=steward, expires_at=until,
                                                      decided_at=datetime(2026, 1, 1, tzinfo=UTC))
        granted_at = datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)
        open_grant = RoleGrant._base_manager.create(user=opened, study=study, role="researcher")
        RoleGrant._base_manager.filter(pk=open_grant.pk).update(granted_at=granted_at)
        decided_grant = RoleGrant._base_manager.create(user=asked, study=study, role="researcher", expires_at=until)
        other_role = RoleGrant._base_manager.create(user=coordinator, study=study, role="coordinator")

        new = _migrate(AFTER)
        grants = new.get_model("access", "RoleGrant")._base_manager
        rows = {row["pk"]: row for row in grants.values("pk", "expires_at", "access_request_id")}
        assert rows[open_grant.pk] == {"pk": open_grant.pk, "access_request_id": None,
                                       "expires_at": granted_at + timedelta(days=settings.CERES_ACCESS_MAX_DAYS)}
        assert rows[decided_grant.pk] == {"pk": decided_grant.pk, "expires_at": until, "access_request_id": decision.pk}
        assert rows[other_role.pk] == {"pk": other_role.pk, "expires_at": None, "access_request_id": None}
        with pytest.raises(IntegrityError), transaction.atomic():
            grants.filter(pk=open_grant.pk).update(expires_at=None)
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
