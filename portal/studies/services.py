"""Study registry services: the only place where studies and their registry change state.

Views, forms, the API, the admin, management commands and Celery tasks call these functions, so
each rule lives here once. Every change is recorded with ``audit.record`` inside the same
transaction. Each function enters the study scope itself, so callers outside a request (ingest,
tasks, scripts) need no scope of their own.
"""

from __future__ import annotations

import csv
import hashlib
import io
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

from exporter.designator import family_pair, generate_designator, validate_designator
from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.studies.models import (
    ConsentDocument,
    ConsentEvent,
    DataUseAgreement,
    Demonstrator,
    Headset,
    Study,
)
from portal.studies.signals import consent_withdrawn


class StudyError(Exception):
    """A study change breaks a rule; the message says which."""


class RegistryError(StudyError):
    """A registry change or look-up breaks a rule; the message names what is wrong."""


class HeadsetImportError(RegistryError):
    """A headset CSV file has bad rows; ``errors`` lists ``(row number, reason)``, nothing was imported."""

    def __init__(self, errors: list[tuple[int, str]]):
        self.errors = errors
        shown = "; ".join(f"row {row}: {reason}" for row, reason in errors[:10])
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        super().__init__(f"{len(errors)} bad row(s), nothing imported: {shown}{more}")


HEADSET_ID_MAX_CHARS = 128
HEADSET_CSV_MAX_ROWS = 10_000
HEADSET_CSV_MAX_BYTES = 2 * 1024 * 1024
CONSENT_DOCUMENT_MAX_BYTES = 20 * 1024 * 1024
CONSENT_SCOPES = tuple(ConsentEvent.Scope.values)
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _today() -> date:
    return timezone.localdate()


def _user(actor):
    """The user to store in a ``*_by`` column; registry changes need a signed-in person."""
    if getattr(actor, "is_authenticated", False):
        return actor
    raise RegistryError("this registry change needs a signed-in user as its actor")


# --- studies ----------------------------------------------------------------------------------


def _snapshot(study: Study) -> dict:
    return {
        "code": study.code,
        "title": study.title,
        "status": study.status,
        "project_id": study.project_id,
        "audio_policy": study.audio_policy,
        "audio_retain_days": study.audio_retain_days,
        "approvals_required": study.approvals_required,
    }


@transaction.atomic
def create_study(actor, *, code: str, title: str, project_id: str = "", status: str = Study.Status.DRAFT,
                 audio_policy: str = Study.AudioPolicy.DISCARD, audio_retain_days: int | None = None,
                 approvals_required: int = 2) -> Study:
    study = Study(code=code, title=title, project_id=project_id, status=status, audio_policy=audio_policy,
                  audio_retain_days=audio_retain_days, approvals_required=approvals_required)
    taken = StudyError(f"a study with the code {code!r} already exists")
    if Study.objects.filter(code=code).exists():
        raise taken
    study.full_clean(validate_unique=False)
    try:
        with transaction.atomic():  # a concurrent creation of the same code loses here, like a sequential one
            study.save()
    except IntegrityError:
        raise taken from None
    record(actor, "study.created", study, after=_snapshot(study))
    return study


# draft -> active -> closed; a closed study may be reopened, but never goes back to draft.
_STATUS_MOVES = {
    Study.Status.DRAFT: {Study.Status.ACTIVE, Study.Status.CLOSED},
    Study.Status.ACTIVE: {Study.Status.CLOSED},
    Study.Status.CLOSED: {Study.Status.ACTIVE},
}


def _locked(study: Study) -> Study:
    return Study.objects.select_for_update().get(pk=study.pk)


@transaction.atomic
def set_study_status(actor, study: Study, status: str) -> Study:
    locked = _locked(study)
    if status not in Study.Status.values:
        raise RegistryError(f"unknown study status {status!r}; expected one of {', '.join(Study.Status.values)}")
    if status not in _STATUS_MOVES[locked.status]:
        raise RegistryError(f"study {locked.code} cannot go from {locked.status} to {status}")
    before = _snapshot(locked)
    locked.status = status
    locked.save(update_fields=["status"])
    record(actor, "study.status_changed", locked, before=before, after=_snapshot(locked))
    study.status = locked.status
    return locked


@transaction.atomic
def set_audio_policy(actor, study: Study, policy: str, *, retain_days: int | None = None) -> Study:
    """Set the raw-audio retention policy; ``retain_days`` is required for (and only for) ``retain-days``."""
    locked = _locked(study)
    if policy not in Study.AudioPolicy.values:
        raise RegistryError(f"unknown audio policy {policy!r}; expected one of "
                            f"{', '.join(Study.AudioPolicy.values)}")
    if policy == Study.AudioPolicy.RETAIN_DAYS:
        if retain_days is None or retain_days < 1:
            raise RegistryError("the retain-days policy needs a number of days of at least 1")
    elif retain_days is not None:
        raise RegistryError(f"a number of days applies only to the retain-days policy, not to {policy}")
    before = _snapshot(locked)
    locked.audio_policy, locked.audio_retain_days = policy, retain_days
    locked.save(update_fields=["audio_policy", "audio_retain_days"])
    record(actor, "study.audio_policy_changed", locked, before=before, after=_snapshot(locked))
    study.audio_policy, study.audio_retain_days = policy, retain_days
    return locked


@transaction.atomic
def set_approvals_required(actor, study: Study, approvals: int) -> Study:
    """How many distinct ethics officers must approve a release of this study (at least 1)."""
    if approvals < 1:
        raise RegistryError("a release needs at least one ethics officer's approval")
    locked = _locked(study)
    before = _snapshot(locked)
    locked.approvals_required = approvals
    locked.save(update_fields=["approvals_required"])
    record(actor, "study.approvals_required_changed", locked, before=before, after=_snapshot(locked))
    study.approvals_required = approvals
    return locked


def check_accepts_recordings(study: Study) -> None:
    """Raise RegistryError when the study takes no new recordings (it is closed)."""
    if study.status == Study.Status.CLOSED:
        raise RegistryError(f"study {study.code} is closed and accepts no new recordings")


def current_data_use_agreement(study: Study) -> DataUseAgreement | None:
    with study_scope(study=study):
        return DataUseAgreement.objects.order_by("-version").first()


@transaction.atomic
def publish_data_use_agreement(actor, study: Study, *, text: str) -> DataUseAgreement:
    """Publish a new version of the study's data-use agreement (the highest version is current)."""
    text = text.strip()
    if not text:
        raise RegistryError("the data-use agreement text is empty")
    _locked(study)  # serialises version numbers
    with study_scope(study=study):
        current = DataUseAgreement.objects.order_by("-version").first()
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if current is not None and current.sha256 == sha256:
            raise RegistryError(f"the text is identical to the current data-use agreement v{current.version}")
        agreement = DataUseAgreement.objects.create(
            study=study, version=(current.version + 1) if current else 1, text=text, sha256=sha256,
            created_by=_user(actor),
        )
        record(actor, "study.data_use_agreement_published", agreement,
               after={"version": agreement.version, "sha256": sha256})
    return agreement


# --- headsets ---------------------------------------------------------------------------------


def headset_id_problem(headset_id: str) -> str | None:
    """Why ``headset_id`` cannot be a headset ID, or None when it can."""
    if not headset_id:
        return "the headset ID is empty"
    if headset_id != headset_id.strip():
        return f"headset ID {headset_id!r} starts or ends with white space"
    if len(headset_id.encode("utf-8")) < 2:
        return f"headset ID {headset_id!r} is shorter than two bytes of UTF-8"
    if len(headset_id) > HEADSET_ID_MAX_CHARS:
        return f"headset ID is longer than {HEADSET_ID_MAX_CHARS} characters"
    if any(not ch.isprintable() for ch in headset_id):
        return f"headset ID {headset_id!r} contains a control character"
    return None


def _headset_snapshot(headset: Headset) -> dict:
    return {"headset_id": headset.headset_id, "model": headset.model, "retired_on": headset.retired_on}


def _check_open_for_registry(study: Study) -> None:
    if study.status == Study.Status.CLOSED:
        raise RegistryError(f"study {study.code} is closed; its registry takes no new entries")


@transaction.atomic
def register_headset(actor, study: Study, *, headset_id: str, model: str = "") -> Headset:
    _check_open_for_registry(study)
    problem = headset_id_problem(headset_id)
    if problem:
        raise RegistryError(problem)
    with study_scope(study=study):
        duplicate = RegistryError(f"headset ID {headset_id!r} is already registered in study {study.code}")
        if Headset.objects.filter(headset_id=headset_id).exists():
            raise duplicate
        try:
            with transaction.atomic():  # a concurrent registration of the same ID loses here
                headset = Headset.objects.create(study=study, headset_id=headset_id, model=model.strip()[:128],
                                                 registered_by=_user(actor))
        except IntegrityError:
            raise duplicate from None
        record(actor, "headset.registered", headset, after=_headset_snapshot(headset))
    return headset


def _csv_text(fileobj: IO) -> str:
    raw = fileobj.read(HEADSET_CSV_MAX_BYTES + 1)
    if len(raw) > HEADSET_CSV_MAX_BYTES:
        raise HeadsetImportError([(0, f"the file is larger than {HEADSET_CSV_MAX_BYTES // 1024} KiB")])
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HeadsetImportError([(0, f"the file is not UTF-8 text (byte {exc.start})")]) from None


@transaction.atomic
def import_headsets_csv(actor, study: Study, fileobj: IO) -> list[Headset]:
    """Register every headset of a CSV file (columns ``headset_id`` and optional ``model``), or none.

    Row numbers count like a spreadsheet: the header is row 1, the first headset row 2 (row 0 is the
    file as a whole: too large, not UTF-8). Any bad row
    (invalid or duplicate ID, unknown column, too many rows) fails the whole file with every fault
    listed in ``HeadsetImportError.errors``.
    """
    _check_open_for_registry(study)
    reader = csv.reader(io.StringIO(_csv_text(fileobj), newline=""))
    header = [name.strip().lower() for name in next(reader, [])]
    if "headset_id" not in header:
        raise HeadsetImportError([(1, "the header row needs a headset_id column (and optionally model)")])
    unknown = sorted(set(header) - {"headset_id", "model"})
    if unknown:
        raise HeadsetImportError([(1, f"unknown column(s) {', '.join(unknown)}; expected headset_id, model")])
    with study_scope(study=study):
        registered = set(Headset.objects.values_list("headset_id", flat=True))
        rows = _headset_rows(reader, header, registered, study)
        user = _user(actor)
        try:
            with transaction.atomic():  # a concurrent import of the same IDs loses here, like a sequential one
                headsets = [Headset.objects.create(study=study, headset_id=headset_id, model=model,
                                                   registered_by=user) for _, headset_id, model in rows]
        except IntegrityError:
            registered = set(Headset.objects.values_list("headset_id", flat=True))
            raise HeadsetImportError([(row, _already_registered(headset_id, study))
                                      for row, headset_id, _ in rows if headset_id in registered]) from None
        for headset in headsets:
            record(actor, "headset.registered", headset, after=_headset_snapshot(headset))
    return headsets


def _already_registered(headset_id: str, study: Study) -> str:
    return f"headset ID {headset_id!r} is already registered in study {study.code}"


def _headset_rows(reader, header: list[str], registered: set[str], study: Study) -> list[tuple[int, str, str]]:
    """The CSV's headset rows as (row number, headset ID, model); HeadsetImportError lists every bad row."""
    errors: list[tuple[int, str]] = []
    rows: list[tuple[int, str, str]] = []
    first_row: dict[str, int] = {}
    for row_number, values in enumerate(reader, start=2):
        if not any(value.strip() for value in values):
            continue
        if row_number > HEADSET_CSV_MAX_ROWS + 1:
            errors.append((row_number, f"more than {HEADSET_CSV_MAX_ROWS} headsets in one file"))
            break
        if len(values) != len(header):
            errors.append((row_number, f"{len(values)} values for {len(header)} columns"))
            continue
        fields = dict(zip(header, values, strict=True))
        headset_id, model = fields["headset_id"].strip(), fields.get("model", "").strip()
        problem = headset_id_problem(headset_id)
        if problem:
            errors.append((row_number, problem))
        elif headset_id in registered:
            errors.append((row_number, _already_registered(headset_id, study)))
        elif headset_id in first_row:
            errors.append((row_number, f"headset ID {headset_id!r} repeats row {first_row[headset_id]}"))
        elif len(model) > 128:
            errors.append((row_number, "the model is longer than 128 characters"))
        else:
            first_row[headset_id] = row_number
            rows.append((row_number, headset_id, model))
    if errors:
        raise HeadsetImportError(errors)
    if not rows:
        raise HeadsetImportError([(2, "the file has no headset rows")])
    return rows


@transaction.atomic
def retire_headset(actor, headset: Headset, on_date: date) -> Headset:
    """Retire a headset from ``on_date``: recordings made on or after that date are quarantined.

    The date may precede the registration: a headset used and retired before anyone registered it
    is registered late so that its earlier recordings can be checked.
    """
    with study_scope(study=headset.study):
        locked = Headset.objects.select_for_update().get(pk=headset.pk)
        if locked.retired_on is not None:
            raise RegistryError(f"headset {locked.headset_id!r} was already retired on {locked.retired_on}")
        before = _headset_snapshot(locked)
        locked.retired_on = on_date
        locked.save(update_fields=["retired_on"])
        record(actor, "headset.retired", locked, before=before, after=_headset_snapshot(locked))
    headset.retired_on = on_date
    return locked


def headset_for_recording(study: Study, headset_id: str, recorded_on: date) -> Headset:
    """The study's headset that made a recording on ``recorded_on``; RegistryError if unknown or retired.

    Registration may come after the recording (a coordinator fixes the registry, then re-checks a
    quarantined recording), so only the retirement date is compared.
    """
    with study_scope(study=study):
        headset = Headset.objects.filter(headset_id=headset_id).first()
    if headset is None:
        raise RegistryError(f"headset {headset_id!r} is not registered in study {study.code}")
    if headset.retired_on is not None and headset.retired_on <= recorded_on:
        raise RegistryError(f"headset {headset_id!r} was retired on {headset.retired_on}, "
                            f"on or before the recording date {recorded_on}")
    return headset


# --- demonstrators ----------------------------------------------------------------------------


def normalise_designator(text: str) -> str:
    return text.strip().lower()


def _demonstrator_snapshot(demonstrator: Demonstrator) -> dict:
    return {"designator": demonstrator.designator,
            "headset": demonstrator.headset.headset_id if demonstrator.headset else None}


def _check_headset(study: Study, headset: Headset | None) -> None:
    if headset is not None and headset.study_id != study.pk:
        raise RegistryError(f"headset {headset.headset_id!r} belongs to another study")


@transaction.atomic
def create_demonstrator(actor, study: Study, *, designator: str = "", headset: Headset | None = None
                        ) -> Demonstrator:
    """Register a demonstrator; a blank designator is generated (family pair from ``headset`` when given).

    A typed designator is validated like a generated one and, with a headset, must carry that
    headset's family pair.
    """
    _check_open_for_registry(study)
    _check_headset(study, headset)
    typed = normalise_designator(designator)
    with study_scope(study=study):
        if typed:
            try:
                validate_designator(typed)
            except ValueError as exc:
                raise RegistryError(str(exc)) from None
            if headset is not None:
                expected = "-".join(family_pair(headset.headset_id))
                if not typed.startswith(expected + "-"):
                    raise RegistryError(f"designator {typed!r} does not start with the family pair {expected!r} "
                                        f"of headset {headset.headset_id!r}")
            taken = RegistryError(f"designator {typed!r} is already used in study {study.code}")
            if Demonstrator.objects.filter(designator=typed).exists():
                raise taken
            try:
                with transaction.atomic():  # a concurrent registration of the same designator loses here
                    demonstrator = Demonstrator.objects.create(study=study, designator=typed, headset=headset,
                                                               created_by=_actor_user(actor))
            except IntegrityError:
                raise taken from None
        else:
            demonstrator = _create_generated(actor, study, headset)
        record(actor, "demonstrator.created", demonstrator, after=_demonstrator_snapshot(demonstrator))
    return demonstrator


def _actor_user(actor):
    return actor if getattr(actor, "is_authenticated", False) else None


def _create_generated(actor, study: Study, headset: Headset | None) -> Demonstrator:
    def is_taken(candidate: str) -> bool:
        return Demonstrator.objects.filter(designator=candidate).exists()

    # A concurrent writer can take the same designator between the check and the insert: draw again.
    for _ in range(5):
        try:
            designator = generate_designator(headset.headset_id if headset else None, is_taken)
        except RuntimeError as exc:
            raise RegistryError(str(exc)) from None
        try:
            with transaction.atomic():
                return Demonstrator.objects.create(study=study, designator=designator, headset=headset,
                                                   created_by=_actor_user(actor))
        except IntegrityError:
            continue
    raise RegistryError("could not store a unique designator; try again")


def registered_demonstrator(study: Study, designator: str) -> Demonstrator:
    """The study's demonstrator a recording names; RegistryError when the designator is blank or unknown.

    A look-up only: ingest never creates a demonstrator (a coordinator does, see ``create_demonstrator``).
    """
    typed = normalise_designator(designator)
    if not typed:
        raise RegistryError("capture.json names no demonstrator (a blank designator): register one for this "
                            "recording, record their consent, then re-check")
    with study_scope(study=study):
        demonstrator = Demonstrator.objects.filter(designator=typed).first()
    if demonstrator is None:
        raise RegistryError(f"demonstrator {typed!r} is not registered in study {study.code}")
    return demonstrator


# --- consent documents ------------------------------------------------------------------------


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
    issued_on = issued_on or _today()
    if issued_on > _today():
        raise RegistryError(f"the document's issue date {issued_on} is in the future")
    content = uploaded_file.read(CONSENT_DOCUMENT_MAX_BYTES + 1)
    if not content:
        raise RegistryError("the consent document file is empty")
    if len(content) > CONSENT_DOCUMENT_MAX_BYTES:
        raise RegistryError(f"the consent document is larger than {CONSENT_DOCUMENT_MAX_BYTES // (1024 * 1024)} MB")
    media_type, extension = _media_type(content)
    sha256 = hashlib.sha256(content).hexdigest()
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
                    media_type=media_type, sha256=sha256, size=len(content), uploaded_by=_user(actor),
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
    user = _user(actor)
    if not has_role(user, study, Role.ETHICS_OFFICER):
        raise RegistryError(f"only an ethics officer of study {study.code} can accept a consent document")
    with study_scope(study=study):
        locked = ConsentDocument.objects.select_for_update().get(pk=document.pk)
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


# --- consent events ---------------------------------------------------------------------------


def _event_snapshot(event: ConsentEvent) -> dict:
    return {"demonstrator": event.demonstrator.designator, "kind": event.kind, "event_date": event.event_date,
            "document": str(event.document) if event.document else None, "scopes": event.scopes,
            "reason": event.reason}


def _locked_events(demonstrator: Demonstrator) -> list[ConsentEvent]:
    # Lock the demonstrator row so two consent events for one person are checked one after the other.
    Demonstrator.objects.select_for_update().filter(pk=demonstrator.pk).first()
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
    if consent_date > _today():
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
            event_date=consent_date, scopes=chosen, recorded_by=_user(actor),
        )
        record(actor, "consent.given", event, after=_event_snapshot(event))
    return event


@transaction.atomic
def withdraw_consent(actor, demonstrator: Demonstrator, *, withdrawal_date: date, reason: str) -> ConsentEvent:
    """Record a withdrawal of all the demonstrator's consent from ``withdrawal_date`` on.

    Sends ``consent_withdrawn`` inside the transaction: receivers that act outside the database
    should defer with ``transaction.on_commit``.
    """
    study = demonstrator.study
    reason = reason.strip()
    if not reason:
        raise RegistryError("a withdrawal needs a reason")
    if withdrawal_date > _today():
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
            reason=reason, recorded_by=_user(actor),
        )
        record(actor, "consent.withdrawn", event, after=_event_snapshot(event))
        consent_withdrawn.send(sender=Demonstrator, demonstrator=demonstrator, event=event)
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
