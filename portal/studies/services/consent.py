"""Consent: documents (stored by content, accepted by an ethics officer), append-only consent events (given,
withdrawn) and coverage: is a demonstrator's recording covered for a scope?"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import IO

from django.core.files.base import ContentFile, File
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_scopes import scope as study_scope

from exporter.receipt import bytes_digest
from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.studies.exceptions import RegistryError
from portal.studies.models import ConsentDocument, ConsentEvent, Demonstrator, Study
from portal.studies.services.registry_change import signed_in_user, today

CONSENT_DOCUMENT_MAX_BYTES = 20 * 1024 * 1024
CONSENT_SCOPES = tuple(ConsentEvent.Scope.values)
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

def _label_problem(what: str, value: str, max_length: int) -> str | None:
    if not _LABEL.fullmatch(value):
        return f"the {what} {value!r} must be letters, digits, '.', '_' or '-' (starting with a letter or digit)"
    if len(value) > max_length:
        return f"the {what} is longer than {max_length} characters"
    return None


def _media_type(content: bytes) -> tuple[str, str]:
    if content.startswith(b"%PDF-"):
        return "application/pdf", "pdf"
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        raise RegistryError("a consent document must be a PDF or UTF-8 text") from None
    return "text/plain; charset=utf-8", "txt"


def consent_document_path(study: Study, sha256: str, extension: str) -> str:
    return f"consent-documents/{study.code}/{sha256}.{extension}"


@transaction.atomic
def upload_consent_document(actor, study: Study, *, identifier: str, version: str, uploaded_file: IO,
                            issued_on: date | None = None) -> ConsentDocument:
    """Store a consent document (PDF or UTF-8 text) with its SHA-256; it awaits an ethics officer's acceptance.

    The file goes to the ``captures`` storage under a content-addressed name, so a retry after a
    failed database write re-uses the same object instead of leaving a second copy.
    """
    identifier, version = identifier.strip(), version.strip()
    for what, value, limit in (("identifier", identifier, 64), ("version", version, 32)):
        problem = _label_problem(what, value, limit)
        if problem:
            raise RegistryError(problem)
    issued_on = issued_on or today()
    if issued_on > today():
        raise RegistryError(f"the document's issue date {issued_on} is in the future")
    content = uploaded_file.read(CONSENT_DOCUMENT_MAX_BYTES + 1)
    if not content:
        raise RegistryError("the consent document file is empty")
    if len(content) > CONSENT_DOCUMENT_MAX_BYTES:
        raise RegistryError(f"the consent document is larger than {CONSENT_DOCUMENT_MAX_BYTES // (1024 * 1024)} MB")
    media_type, extension = _media_type(content)
    sha256, size = bytes_digest(content)
    with study_scope(study=study):
        if ConsentDocument.objects.filter(identifier=identifier, version=version).exists():
            raise RegistryError(f"consent document {identifier} version {version} already exists in study "
                                f"{study.code}")
        storage = storages["captures"]
        name = consent_document_path(study, sha256, extension)
        if not storage.exists(name):
            stored = storage.save(name, ContentFile(content))
            if stored != name:
                raise RegistryError(f"the storage renamed the consent document to {stored!r}")
        try:
            with transaction.atomic():  # a concurrent upload of the same identifier and version loses here
                document = ConsentDocument.objects.create(
                    study=study, identifier=identifier, version=version, issued_on=issued_on, file_name=name,
                    media_type=media_type, sha256=sha256, size=size, uploaded_by=signed_in_user(actor),
                )
        except IntegrityError:
            raise RegistryError(f"consent document {identifier} version {version} already exists in study "
                                f"{study.code}") from None
        record(actor, "consent_document.uploaded", document, after=_document_snapshot(document))
    return document


def _document_snapshot(document: ConsentDocument) -> dict:
    return {"identifier": document.identifier, "version": document.version, "issued_on": document.issued_on,
            "sha256": document.sha256, "size": document.size, "media_type": document.media_type,
            "accepted_by": document.accepted_by.get_username() if document.accepted_by else None,
            "accepted_at": document.accepted_at}


@transaction.atomic
def accept_consent_document(actor, document: ConsentDocument) -> ConsentDocument:
    """An ethics officer of the study accepts the document for release; never the person who uploaded it."""
    study = document.study
    user = signed_in_user(actor)
    if not has_role(user, study, Role.ETHICS_OFFICER):
        raise RegistryError(f"only an ethics officer of study {study.code} can accept a consent document")
    with study_scope(study=study):
        locked = ConsentDocument.objects.select_for_update(no_key=True).get(pk=document.pk)
        if locked.is_accepted:
            raise RegistryError(f"consent document {locked} was already accepted on {locked.accepted_at:%Y-%m-%d}")
        if locked.uploaded_by_id == user.pk:
            raise RegistryError(f"consent document {locked} was uploaded by you; another ethics officer must "
                                f"accept it")
        before = _document_snapshot(locked)
        locked.accepted_by, locked.accepted_at = user, timezone.now()
        locked.save(update_fields=["accepted_by", "accepted_at"])
        record(actor, "consent_document.accepted", locked, before=before, after=_document_snapshot(locked))
    document.accepted_by, document.accepted_at = locked.accepted_by, locked.accepted_at
    return locked


def open_consent_document(document: ConsentDocument) -> File:
    """The stored document, opened for binary reading (the caller closes it)."""
    return storages["captures"].open(document.file_name, "rb")


def _event_snapshot(event: ConsentEvent) -> dict:
    return {"demonstrator": event.demonstrator.designator, "kind": event.kind, "event_date": event.event_date,
            "document": str(event.document) if event.document else None, "scopes": event.scopes,
            "reason": event.reason}


def _locked_events(demonstrator: Demonstrator) -> list[ConsentEvent]:
    # Lock the demonstrator row so two consent events for one person are checked one after the other.
    Demonstrator.objects.select_for_update(no_key=True).filter(pk=demonstrator.pk).first()
    return list(ConsentEvent.objects.filter(demonstrator=demonstrator).select_related("document"))


def _normalise_scopes(scopes: Iterable[str]) -> list[str]:
    chosen = sorted(set(scopes))
    if not chosen:
        raise RegistryError("consent needs at least one scope")
    unknown = [s for s in chosen if s not in CONSENT_SCOPES]
    if unknown:
        raise RegistryError(f"unknown consent scope(s) {', '.join(unknown)}; expected {', '.join(CONSENT_SCOPES)}")
    return chosen


@transaction.atomic
def give_consent(actor, demonstrator: Demonstrator, *, document: ConsentDocument, consent_date: date,
                 scopes: Iterable[str]) -> ConsentEvent:
    """Record that the demonstrator consented to ``document`` on ``consent_date`` for ``scopes``.

    The date may not be in the future, before the document's issue date, or on or before an earlier
    withdrawal (a renewed consent starts after the withdrawal).
    """
    study = demonstrator.study
    if document.study_id != study.pk:
        raise RegistryError(f"consent document {document} belongs to another study")
    chosen = _normalise_scopes(scopes)
    if consent_date > today():
        raise RegistryError(f"the consent date {consent_date} is in the future")
    if consent_date < document.issued_on:
        raise RegistryError(f"the consent date {consent_date} is before consent document {document} was issued "
                            f"({document.issued_on})")
    with study_scope(study=study):
        events = _locked_events(demonstrator)
        withdrawals = [e.event_date for e in events if e.kind == ConsentEvent.Kind.WITHDRAWN]
        if withdrawals and consent_date <= max(withdrawals):
            raise RegistryError(f"the consent date {consent_date} is not after the withdrawal of {max(withdrawals)}")
        if any(e.kind == ConsentEvent.Kind.GIVEN and e.document_id == document.pk and e.event_date == consent_date
               and sorted(e.scopes) == chosen for e in events):
            raise RegistryError(f"consent of {demonstrator} to {document} on {consent_date} for "
                                f"{', '.join(chosen)} is already recorded")
        event = ConsentEvent.objects.create(
            study=study, demonstrator=demonstrator, kind=ConsentEvent.Kind.GIVEN, document=document,
            event_date=consent_date, scopes=chosen, recorded_by=signed_in_user(actor),
        )
        record(actor, "consent.given", event, after=_event_snapshot(event))
    return event


@transaction.atomic
def record_withdrawal(actor, demonstrator: Demonstrator, *, withdrawal_date: date, reason: str) -> ConsentEvent:
    """Record a withdrawal of all the demonstrator's consent from ``withdrawal_date`` on: the registry's part only.

    A withdrawal also reaches raw audio and released data, which the registry does not hold: it is made through
    ``research.services.withdrawals.withdraw_consent``, which calls this in its transaction.
    """
    study = demonstrator.study
    reason = reason.strip()
    if not reason:
        raise RegistryError("a withdrawal needs a reason")
    if withdrawal_date > today():
        raise RegistryError(f"the withdrawal date {withdrawal_date} is in the future")
    with study_scope(study=study):
        events = _locked_events(demonstrator)
        last_withdrawal = max((e.event_date for e in events if e.kind == ConsentEvent.Kind.WITHDRAWN), default=None)
        standing = [e for e in events if e.kind == ConsentEvent.Kind.GIVEN
                    and (last_withdrawal is None or e.event_date > last_withdrawal)]
        if not standing:
            raise RegistryError(f"demonstrator {demonstrator} has no consent to withdraw")
        latest = max(e.event_date for e in standing)
        if withdrawal_date < latest:
            raise RegistryError(f"the withdrawal date {withdrawal_date} is before the consent given on {latest}")
        event = ConsentEvent.objects.create(
            study=study, demonstrator=demonstrator, kind=ConsentEvent.Kind.WITHDRAWN, event_date=withdrawal_date,
            reason=reason, recorded_by=signed_in_user(actor),
        )
        record(actor, "consent.withdrawn", event, after=_event_snapshot(event))
    return event


@dataclass(frozen=True)
class Coverage:
    covered: bool
    reason: str
    event: ConsentEvent | None = None
    document: ConsentDocument | None = None


def consent_coverage(demonstrator: Demonstrator, on_date: date, scope: str) -> Coverage:
    """Is the demonstrator covered for ``scope`` for a recording made on ``on_date``, judged now?

    Covered when a ``given`` event with that scope, of an accepted document, is dated on or before
    ``on_date`` and no withdrawal is dated on or after that consent. A withdrawal therefore ends the
    coverage of every recording made under the consent it withdraws, including recordings made
    before the withdrawal date; a renewed consent (dated after the withdrawal) covers only
    recordings made on or after its own date.
    """
    if scope not in CONSENT_SCOPES:
        raise RegistryError(f"unknown consent scope {scope!r}; expected {', '.join(CONSENT_SCOPES)}")
    with study_scope(study=demonstrator.study):
        events = list(ConsentEvent.objects.filter(demonstrator=demonstrator)
                      .select_related("document").order_by("event_date", "pk"))
    withdrawals = [e for e in events if e.kind == ConsentEvent.Kind.WITHDRAWN]
    given = [e for e in events if e.kind == ConsentEvent.Kind.GIVEN and e.event_date <= on_date]
    if not given:
        return Coverage(False, f"no consent dated on or before {on_date}")
    standing = [e for e in given if not any(w.event_date >= e.event_date for w in withdrawals)]
    if not standing:
        withdrawal = next(w for w in withdrawals if w.event_date >= given[-1].event_date)
        return Coverage(False, f"consent withdrawn on {withdrawal.event_date}", withdrawal)
    scoped = [e for e in standing if scope in e.scopes]
    if not scoped:
        return Coverage(False, f"the consent does not include {scope}", standing[-1], standing[-1].document)
    accepted = [e for e in scoped if e.document.is_accepted]
    if not accepted:
        latest = scoped[-1]
        return Coverage(False, f"consent document {latest.document} is not accepted by an ethics officer",
                        latest, latest.document)
    event = accepted[-1]
    return Coverage(True, f"consent of {event.event_date} to {event.document}", event, event.document)


def is_covered(demonstrator: Demonstrator, on_date: date, scope: str) -> bool:
    return consent_coverage(demonstrator, on_date, scope).covered
