"""Two requests at once for the same registry change, on PostgreSQL: the loser gets the message a sequential
duplicate gets (a clear error or the same update), never an IntegrityError."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django_scopes import scope

from portal.access.models import RoleGrant
from portal.access.services import grant_role
from portal.audit.models import AuditEvent
from portal.studies.exceptions import HeadsetImportError, RegistryError, StudyError
from portal.studies.models import Demonstrator, Headset, Study
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.headsets import import_headsets_csv
from portal.studies.services.study import create_study
from tests.portal.concurrency import needs_postgres, run_at_once

pytestmark = needs_postgres


@pytest.mark.parametrize("attempt", range(10))
def test_the_same_typed_designator_twice_at_once(study, coordinator, attempt):
    designator = "able-acorn-fox-oak"
    outcomes = run_at_once(study, [lambda: create_demonstrator(coordinator, study, designator=designator)] * 2,
                           expected=(RegistryError,))
    errors = [str(o) for o in outcomes if isinstance(o, Exception)]
    assert errors == [f"designator {designator!r} is already used in study alpha"]
    with scope(study=study):
        assert Demonstrator.objects.filter(designator=designator).count() == 1


@pytest.mark.parametrize("attempt", range(5))
def test_the_same_headset_csv_twice_at_once(study, coordinator, attempt):
    def import_csv():
        return import_headsets_csv(coordinator, study, io.BytesIO(b"headset_id,model\nHS-1,a\nHS-2,b\n"))

    outcomes = run_at_once(study, [import_csv, import_csv], expected=(HeadsetImportError,))
    errors = [o for o in outcomes if isinstance(o, Exception)]
    assert len(errors) == 1
    assert errors[0].errors == [(2, "headset ID 'HS-1' is already registered in study alpha"),
                                (3, "headset ID 'HS-2' is already registered in study alpha")]
    with scope(study=study):
        assert sorted(Headset.objects.values_list("headset_id", flat=True)) == ["HS-1", "HS-2"]


@pytest.mark.parametrize("attempt", range(5))
def test_the_same_new_role_grant_twice_at_once(study, attempt):
    user = get_user_model().objects.create_user(f"new-{attempt}")
    outcomes = run_at_once(None, [lambda: grant_role("test", user, study, "ethics_officer")] * 2)
    assert outcomes[0].pk == outcomes[1].pk
    assert RoleGrant.objects.filter(user=user, study=study, role="ethics_officer").count() == 1
    granted = AuditEvent.objects.filter(action="access.role_granted", target_id=str(outcomes[0].pk),
                                        after__user=user.get_username())
    assert granted.count() == 1, "the second grant changed nothing, so it records nothing"


@pytest.mark.parametrize("attempt", range(3))
def test_the_same_study_code_twice_at_once(attempt):
    outcomes = run_at_once(None, [lambda: create_study("test", code="gamma", title="Gamma")] * 2,
                           expected=(StudyError,))
    assert [str(o) for o in outcomes if isinstance(o, Exception)] == ["a study with the code 'gamma' already exists"]
    assert Study.objects.filter(code="gamma").count() == 1
