"""The study overview's registry counts, read with one query compiled once per process (``core.fixed_query``):
the counts the ORM's six queries give, of this study only, read anew on every visit."""

from __future__ import annotations

from datetime import date

import pytest
from django_scopes import scope

from portal.studies.models import ConsentDocument, ConsentEvent, Demonstrator, Headset
from portal.studies.services.consent import give_consent, record_withdrawal
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.headsets import register_headset, retire_headset
from portal.studies.services.study import registry_counts

pytestmark = pytest.mark.django_db


def _orm_counts(study) -> dict[str, int]:
    with scope(study=study):
        return {
            "headsets": Headset.objects.filter(retired_on__isnull=True).count(),
            "retired_headsets": Headset.objects.filter(retired_on__isnull=False).count(),
            "demonstrators": Demonstrator.objects.count(),
            "withdrawn": Demonstrator.objects.filter(consent_events__kind=ConsentEvent.Kind.WITHDRAWN)
            .distinct().count(),
            "documents": ConsentDocument.objects.count(),
            "pending_documents": ConsentDocument.objects.filter(accepted_at__isnull=True).count(),
        }


def test_the_counts_are_the_orms_of_this_study(study, make_study, make_user, coordinator, headset, demonstrator,
                                               make_document, ethics):
    empty = make_study("empty")
    assert registry_counts(empty) == _orm_counts(empty) == dict.fromkeys(_orm_counts(empty), 0)
    document = make_document(accepted_by=ethics)
    with scope(study=study):
        retired = register_headset(coordinator, study, headset_id="HS-0002", model="Quest 3")
        retire_headset(coordinator, retired, date(2026, 2, 1))
        second = create_demonstrator(coordinator, study, headset=headset)
        create_demonstrator(coordinator, study, headset=headset)
        for day in (1, 3):  # two withdrawals of one demonstrator count once
            give_consent(coordinator, second, document=document, consent_date=date(2026, 3, day),
                         scopes=["episode_release"])
            record_withdrawal(coordinator, second, withdrawal_date=date(2026, 3, day + 1), reason="moved away")
    make_document(identifier="ICF-2026-04")
    other = make_study("other")
    other_coordinator = make_user("other-coord", other, ["coordinator"])
    with scope(study=other):
        register_headset(other_coordinator, other, headset_id="HS-0001", model="Quest 3")
    counts = registry_counts(study)
    assert counts == _orm_counts(study)
    assert counts == {"headsets": 1, "retired_headsets": 1, "demonstrators": 3, "withdrawn": 1, "documents": 2,
                      "pending_documents": 1}
    with scope(study=study):
        register_headset(coordinator, study, headset_id="HS-0003", model="Quest 3")
    assert registry_counts(study)["headsets"] == 2  # read anew
