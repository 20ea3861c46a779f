"""Consent (services/consent.py): consent and withdrawal events and their rules, append-only in the service
and in the database; consent documents stored by content, and who may accept them. Coverage:
test_consent_coverage.py."""

from __future__ import annotations

import hashlib
import io
from datetime import date, timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.research.models import Withdrawal
from portal.research.services import withdrawals
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.exceptions import RegistryError
from portal.studies.models import AppendOnlyError, ConsentEvent
from portal.studies.services.consent import (
    accept_consent_document,
    give_consent,
    open_consent_document,
    upload_consent_document,
)

RELEASE = "episode_release"


@pytest.fixture
def given(demonstrator, coordinator, accepted_document):
    return give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                        scopes=[RELEASE])


def test_consent_in_the_future_is_refused(demonstrator, coordinator, accepted_document):
    tomorrow = timezone.localdate() + timedelta(days=1)
    with pytest.raises(RegistryError, match="in the future"):
        give_consent(coordinator, demonstrator, document=accepted_document, consent_date=tomorrow, scopes=[RELEASE])


def test_consent_before_the_document_was_issued_is_refused(demonstrator, coordinator, accepted_document):
    with pytest.raises(RegistryError, match=r"before consent document ICF-2026-03 v1 was issued \(2026-01-01\)"):
        give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2025, 12, 31),
                     scopes=[RELEASE])


@pytest.mark.parametrize(("scopes", "fault"), [([], "at least one scope"), (["marketing"], "unknown consent scope")])
def test_consent_scopes_are_checked(demonstrator, coordinator, accepted_document, scopes, fault):
    with pytest.raises(RegistryError, match=fault):
        give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                     scopes=scopes)


def test_an_identical_consent_event_is_refused(demonstrator, coordinator, accepted_document, given):
    with pytest.raises(RegistryError, match=rf"consent of {demonstrator} to ICF-2026-03 v1 on 2026-03-10 for "
                                            rf"{RELEASE} is already recorded"):
        give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                     scopes=[RELEASE])
    # Another scope on the same day, or the same scope on another day, is a new fact.
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 10),
                 scopes=[RELEASE, "raw_audio_retention"])
    give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 3, 11),
                 scopes=[RELEASE])
    with scope(study=demonstrator.study):
        assert ConsentEvent.objects.filter(demonstrator=demonstrator).count() == 3


def test_withdrawal_before_consent_is_refused(demonstrator, coordinator, given):
    with pytest.raises(RegistryError, match="before the consent given on 2026-03-10"):
        withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 3, 9), reason="changed mind")


def test_withdrawal_without_consent_is_refused(demonstrator, coordinator):
    with pytest.raises(RegistryError, match="no consent to withdraw"):
        withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 3, 9), reason="changed mind")


def test_withdrawal_needs_a_reason_and_a_past_date(demonstrator, coordinator, given):
    with pytest.raises(RegistryError, match="needs a reason"):
        withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 4, 1), reason="  ")
    with pytest.raises(RegistryError, match="in the future"):
        withdraw_consent(coordinator, demonstrator, withdrawal_date=timezone.localdate() + timedelta(days=1),
                         reason="x")


def test_withdrawal_is_audited_and_opens_its_withdrawal_job_in_its_transaction(demonstrator, coordinator, given):
    """The registry's record and the withdrawal job are one step: the job is opened for the event in the same
    transaction (research's entry point calls the registry, then opens the job, by name)."""
    event = withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 4, 1), reason="by e-mail")
    with scope(study=demonstrator.study):
        assert Withdrawal.objects.get(event=event).state == Withdrawal.State.QUEUED
    audit = AuditEvent.objects.get(action="consent.withdrawn")
    assert audit.after["reason"] == "by e-mail" and audit.after["event_date"] == "2026-04-01"
    with pytest.raises(RegistryError, match="no consent to withdraw"):
        withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 4, 2), reason="again")
    with scope(study=demonstrator.study):
        assert Withdrawal.objects.count() == 1


def test_a_withdrawal_whose_job_cannot_open_is_not_recorded(demonstrator, coordinator, given, monkeypatch):
    def broken(event):
        raise RuntimeError("the job could not be opened")

    monkeypatch.setattr(withdrawals, "open_withdrawal", broken)
    with pytest.raises(RuntimeError):
        withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 4, 1), reason="by e-mail")
    with scope(study=demonstrator.study):
        assert not ConsentEvent.objects.filter(kind=ConsentEvent.Kind.WITHDRAWN).exists()
    assert not AuditEvent.objects.filter(action="consent.withdrawn").exists()


def test_renewed_consent_must_follow_the_withdrawal(demonstrator, coordinator, accepted_document, given):
    withdraw_consent(coordinator, demonstrator, withdrawal_date=date(2026, 4, 1), reason="paused")
    with pytest.raises(RegistryError, match="not after the withdrawal of 2026-04-01"):
        give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 4, 1),
                     scopes=[RELEASE])


def test_events_cannot_be_edited_or_deleted(study, given):
    given.scopes = ["raw_audio_retention"]
    with pytest.raises(AppendOnlyError):
        given.save()
    with pytest.raises(AppendOnlyError):
        given.delete()
    with scope(study=study):
        with pytest.raises(AppendOnlyError):
            ConsentEvent.objects.filter(pk=given.pk).update(reason="edited")
        with pytest.raises(AppendOnlyError):
            ConsentEvent.objects.filter(pk=given.pk).delete()
        assert ConsentEvent.objects.get(pk=given.pk).scopes == [RELEASE]


def test_database_refuses_raw_updates_and_deletes(given):
    """The trigger, on PostgreSQL and on SQLite alike."""
    from django.db import DatabaseError, transaction

    for sql in ("UPDATE studies_consentevent SET reason = 'x' WHERE id = %s",
                "DELETE FROM studies_consentevent WHERE id = %s"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [given.pk])


def test_document_is_stored_by_content_with_its_digest(study, coordinator, storage_dir):
    pdf = b"%PDF-1.4 consent form"
    document = upload_consent_document(coordinator, study, identifier="ICF-2026-03", version="2",
                                       uploaded_file=io.BytesIO(pdf))
    digest = hashlib.sha256(pdf).hexdigest()
    assert (document.sha256, document.size, document.media_type) == (digest, len(pdf), "application/pdf")
    assert document.file_name == f"consent-documents/alpha/{digest}.pdf"
    assert (storage_dir / "captures" / document.file_name).read_bytes() == pdf
    with open_consent_document(document) as handle:
        assert handle.read() == pdf
    assert document.issued_on == timezone.localdate() and not document.is_accepted


@pytest.mark.parametrize(("content", "fault"), [(b"", "empty"), (b"\xff\xd8\xff\xe0 jpeg", "PDF or UTF-8 text")])
def test_bad_documents_are_refused(study, coordinator, storage_dir, content, fault):
    with pytest.raises(RegistryError, match=fault):
        upload_consent_document(coordinator, study, identifier="ICF-1", version="1", uploaded_file=io.BytesIO(content))


def test_duplicate_document_version_is_refused(make_document):
    make_document()
    with pytest.raises(RegistryError, match="ICF-2026-03 version 1 already exists"):
        make_document(text="other text")


def test_acceptance_rules(study, coordinator, make_document, ethics, make_user):
    document = make_document()
    with pytest.raises(RegistryError, match="only an ethics officer"):
        accept_consent_document(coordinator, document)
    accept_consent_document(ethics, document)
    assert document.accepted_by == ethics and document.accepted_at is not None
    with pytest.raises(RegistryError, match="already accepted"):
        accept_consent_document(ethics, document)
    audit = AuditEvent.objects.get(action="consent_document.accepted")
    assert audit.before["accepted_by"] is None and audit.after["accepted_by"] == "ethics"


def test_the_uploader_cannot_accept_their_own_document(study, make_user, storage_dir):
    both = make_user("both", study, ["coordinator", "ethics_officer"])
    document = upload_consent_document(both, study, identifier="ICF-1", version="1",
                                       uploaded_file=io.BytesIO(b"text"))
    with pytest.raises(RegistryError, match="another ethics officer"):
        accept_consent_document(both, document)
