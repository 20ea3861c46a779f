from datetime import date

import pytest

from portal.research.services.withdrawals import withdraw_consent
from portal.studies.exceptions import RegistryError
from portal.studies.services.consent import (
    accept_consent_document,
    consent_coverage,
    give_consent,
    is_covered,
)

RELEASE, AUDIO = "episode_release", "raw_audio_retention"


def test_covered_from_the_consent_date_on(demonstrator, coordinator, accepted_document):
    event = give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                         scopes=[RELEASE])
    assert not is_covered(demonstrator, date(2026, 3, 9), RELEASE)
    coverage = consent_coverage(demonstrator, date(2026, 3, 10), RELEASE)
    assert coverage.covered and coverage.event == event and coverage.document == accepted_document
    assert is_covered(demonstrator, date(2026, 6, 1), RELEASE)


def test_scope_must_be_given(demonstrator, coordinator, accepted_document):
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                 scopes=[RELEASE])
    coverage = consent_coverage(demonstrator, date(2026, 4, 1), AUDIO)
    assert not coverage.covered
    assert "does not include raw_audio_retention" in coverage.reason


def test_unaccepted_document_covers_nothing_until_accepted(demonstrator, coordinator, make_document, ethics):
    document = make_document()
    give_consent(coordinator, demonstrator, document=document, consent_date=date(2026, 3, 10), scopes=[RELEASE])
    coverage = consent_coverage(demonstrator, date(2026, 4, 1), RELEASE)
    assert not coverage.covered and "not accepted" in coverage.reason
    accept_consent_document(ethics, document)
    assert is_covered(demonstrator, date(2026, 4, 1), RELEASE)


def test_withdrawal_ends_coverage_also_of_earlier_recordings(demonstrator, coordinator, accepted_document):
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                 scopes=[RELEASE, AUDIO])
    withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 5, 1), reason="asked by phone")
    for day in (date(2026, 3, 10), date(2026, 4, 30), date(2026, 5, 1), date(2026, 6, 1)):
        for scope in (RELEASE, AUDIO):
            coverage = consent_coverage(demonstrator, day, scope)
            assert not coverage.covered
            assert coverage.reason == "consent withdrawn on 2026-05-01"


def test_renewed_consent_covers_only_from_its_own_date(demonstrator, coordinator, accepted_document):
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                 scopes=[RELEASE])
    withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 5, 1), reason="paused")
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 6, 1),
                 scopes=[RELEASE])
    assert not is_covered(demonstrator, date(2026, 4, 1), RELEASE)
    assert not is_covered(demonstrator, date(2026, 5, 31), RELEASE)
    assert is_covered(demonstrator, date(2026, 6, 1), RELEASE)


def test_later_document_version_does_not_need_the_first(demonstrator, coordinator, make_document, ethics):
    old = make_document(version="1")
    new = make_document(version="2", issued_on=date(2026, 4, 1), text="I agree, v2.", accepted_by=ethics)
    give_consent(coordinator, demonstrator, document=old, consent_date=date(2026, 3, 10), scopes=[RELEASE])
    give_consent(coordinator, demonstrator, document=new, consent_date=date(2026, 4, 2), scopes=[RELEASE])
    assert not is_covered(demonstrator, date(2026, 4, 1), RELEASE)  # only the unaccepted v1 by then
    assert consent_coverage(demonstrator, date(2026, 4, 2), RELEASE).document == new


def test_unknown_scope_is_refused(demonstrator):
    with pytest.raises(RegistryError, match="unknown consent scope"):
        consent_coverage(demonstrator, date(2026, 4, 1), "marketing")
