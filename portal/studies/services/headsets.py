"""Headsets: registration one by one or from a CSV file (all or nothing), the date from which a headset is the
study's (declared at registration or later), retirement, the look-up ingest makes and the release gate's rule."""

from __future__ import annotations

import csv
import io
from datetime import date
from typing import IO

from django.db import IntegrityError, transaction
from django.utils import timezone
from django_scopes import scope as study_scope

from portal.audit.services import record
from portal.studies.exceptions import HeadsetImportError, RegistryError
from portal.studies.models import Headset, Study
from portal.studies.services.registry_change import check_open_for_registry, signed_in_user, today

HEADSET_ID_MAX_CHARS = 128
HEADSET_CSV_MAX_ROWS = 10_000
HEADSET_CSV_MAX_BYTES = 2 * 1024 * 1024
CSV_COLUMNS = ("headset_id", "model", "assigned_on")

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


def assigned_on_problem(assigned_on: date, registered_on: date, retired_on: date | None = None) -> str | None:
    """Why ``assigned_on`` cannot be declared as the date from which a headset registered on ``registered_on``
    (and retired on ``retired_on``) was the study's, or None when it can: never after the registration, and
    before the retirement."""
    if assigned_on > registered_on:
        return f"the headset cannot be the study's from {assigned_on}, after its registration on {registered_on}"
    if retired_on is not None and assigned_on >= retired_on:
        return (f"the headset cannot be the study's from {assigned_on}: it was retired on {retired_on}, on or "
                f"before that date")
    return None


def _headset_snapshot(headset: Headset) -> dict:
    return {"headset_id": headset.headset_id, "model": headset.model, "assigned_on": headset.assigned_on,
            "retired_on": headset.retired_on}


@transaction.atomic
def register_headset(actor, study: Study, *, headset_id: str, model: str = "",
                     assigned_on: date | None = None) -> Headset:
    """Register a headset; it is the study's from ``assigned_on`` (the coordinator's declaration: today, the
    registration date, unless an earlier date is given)."""
    check_open_for_registry(study)
    assigned_on = assigned_on or today()
    problem = headset_id_problem(headset_id) or assigned_on_problem(assigned_on, today())
    if problem:
        raise RegistryError(problem)
    with study_scope(study=study):
        duplicate = RegistryError(f"headset ID {headset_id!r} is already registered in study {study.code}")
        if Headset.objects.filter(headset_id=headset_id).exists():
            raise duplicate
        try:
            with transaction.atomic():  # a concurrent registration of the same ID loses here
                headset = Headset.objects.create(study=study, headset_id=headset_id, model=model.strip()[:128],
                                                 assigned_on=assigned_on, registered_by=signed_in_user(actor))
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
    """Register every headset of a CSV file (columns ``headset_id``, optional ``model`` and ``assigned_on``, an
    ISO date, blank for the registration date), or none.

    Row numbers count like a spreadsheet: the header is row 1, the first headset row 2 (row 0 is the
    file as a whole: too large, not UTF-8). Any bad row
    (invalid or duplicate ID, unknown column, too many rows) fails the whole file with every fault
    listed in ``HeadsetImportError.errors``.
    """
    check_open_for_registry(study)
    reader = csv.reader(io.StringIO(_csv_text(fileobj), newline=""))
    header = [name.strip().lower() for name in next(reader, [])]
    if "headset_id" not in header:
        raise HeadsetImportError([(1, "the header row needs a headset_id column (and optionally model, "
                                      "assigned_on)")])
    unknown = sorted(set(header) - set(CSV_COLUMNS))
    if unknown:
        raise HeadsetImportError([(1, f"unknown column(s) {', '.join(unknown)}; expected "
                                      f"{', '.join(CSV_COLUMNS)}")])
    with study_scope(study=study):
        registered = set(Headset.objects.values_list("headset_id", flat=True))
        rows = _headset_rows(reader, header, registered, study)
        user = signed_in_user(actor)
        try:
            with transaction.atomic():  # a concurrent import of the same IDs loses here, like a sequential one
                headsets = [Headset.objects.create(study=study, headset_id=headset_id, model=model,
                                                   assigned_on=assigned_on, registered_by=user)
                            for _, headset_id, model, assigned_on in rows]
        except IntegrityError:
            registered = set(Headset.objects.values_list("headset_id", flat=True))
            raise HeadsetImportError([(row, _already_registered(headset_id, study))
                                      for row, headset_id, *_ in rows if headset_id in registered]) from None
        for headset in headsets:
            record(actor, "headset.registered", headset, after=_headset_snapshot(headset))
    return headsets


def _already_registered(headset_id: str, study: Study) -> str:
    return f"headset ID {headset_id!r} is already registered in study {study.code}"


def _csv_assigned_on(text: str) -> tuple[date | None, str | None]:
    """The ``assigned_on`` cell as a date (the registration date when blank), or why it is not one."""
    if not text:
        return today(), None
    try:
        assigned_on = date.fromisoformat(text)
    except ValueError:
        return None, f"assigned_on {text!r} is not a date (YYYY-MM-DD)"
    return assigned_on, assigned_on_problem(assigned_on, today())


def _headset_rows(reader, header: list[str], registered: set[str],
                  study: Study) -> list[tuple[int, str, str, date]]:
    """The CSV's headset rows as (row number, headset ID, model, assigned_on); HeadsetImportError lists every
    bad row."""
    errors: list[tuple[int, str]] = []
    rows: list[tuple[int, str, str, date]] = []
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
        assigned_on, assigned_problem = _csv_assigned_on(fields.get("assigned_on", "").strip())
        problem = headset_id_problem(headset_id)
        if problem:
            errors.append((row_number, problem))
        elif headset_id in registered:
            errors.append((row_number, _already_registered(headset_id, study)))
        elif headset_id in first_row:
            errors.append((row_number, f"headset ID {headset_id!r} repeats row {first_row[headset_id]}"))
        elif len(model) > 128:
            errors.append((row_number, "the model is longer than 128 characters"))
        elif assigned_problem:
            errors.append((row_number, assigned_problem))
        else:
            first_row[headset_id] = row_number
            rows.append((row_number, headset_id, model, assigned_on))
    if errors:
        raise HeadsetImportError(errors)
    if not rows:
        raise HeadsetImportError([(2, "the file has no headset rows")])
    return rows


def _save_change(actor, locked: Headset, action: str, **fields) -> None:
    """Set ``fields`` on the locked headset, save them and audit the change with the headset before and after."""
    before = _headset_snapshot(locked)
    for name, value in fields.items():
        setattr(locked, name, value)
    locked.save(update_fields=list(fields))
    record(actor, action, locked, before=before, after=_headset_snapshot(locked))


@transaction.atomic
def declare_assigned_on(actor, headset: Headset, assigned_on: date) -> Headset:
    """A coordinator declares (again) the date from which the headset was the study's: earlier than said at
    registration when its recordings began before it (never later than the registration date, and before its
    retirement). Audited with the date before and after."""
    with study_scope(study=headset.study):
        locked = Headset.objects.select_for_update(no_key=True).get(pk=headset.pk)
        if assigned_on == locked.assigned_on:
            raise RegistryError(f"headset {locked.headset_id!r} is already the study's since {assigned_on}")
        problem = assigned_on_problem(assigned_on, timezone.localdate(locked.registered_at), locked.retired_on)
        if problem:
            raise RegistryError(problem)
        _save_change(actor, locked, "headset.assignment_declared", assigned_on=assigned_on)
    headset.assigned_on = assigned_on
    return locked


@transaction.atomic
def retire_headset(actor, headset: Headset, on_date: date) -> Headset:
    """Retire a headset from ``on_date``: recordings made on or after that date are quarantined.

    The date may precede the registration: a headset used and retired before anyone registered it
    is registered late (with the earlier date it was the study's from) so that its earlier recordings can be
    checked.
    """
    with study_scope(study=headset.study):
        locked = Headset.objects.select_for_update(no_key=True).get(pk=headset.pk)
        if locked.retired_on is not None:
            raise RegistryError(f"headset {locked.headset_id!r} was already retired on {locked.retired_on}")
        _save_change(actor, locked, "headset.retired", retired_on=on_date)
    headset.retired_on = on_date
    return locked


def headset_for_recording(study: Study, headset_id: str, recorded_on: date) -> Headset:
    """The study's headset that made a recording on ``recorded_on``; RegistryError if unknown or retired.

    Registration may come after the recording (a coordinator fixes the registry, then re-checks a
    quarantined recording), so only the retirement date is compared: whether the headset was the study's on
    the recording date is the release gate's question (``not_the_studys_on``), which a declared
    ``assigned_on`` answers.
    """
    with study_scope(study=study):
        headset = Headset.objects.filter(headset_id=headset_id).first()
    if headset is None:
        raise RegistryError(f"headset {headset_id!r} is not registered in study {study.code}")
    if headset.retired_on is not None and headset.retired_on <= recorded_on:
        raise RegistryError(f"headset {headset_id!r} was retired on {headset.retired_on}, "
                            f"on or before the recording date {recorded_on}")
    return headset


def not_the_studys_on(headset: Headset, on_date: date) -> str | None:
    """Why a recording made on ``on_date`` was not made by a headset of the study (it was assigned to the study
    after that date, or retired on or before it), or None when it was: the release gate's headset check
    (governance section 7)."""
    if headset.assigned_on > on_date:
        return f"{headset} was assigned to the study on {headset.assigned_on}, after the recording date {on_date}"
    if headset.retired_on is not None and headset.retired_on <= on_date:
        return f"{headset} was retired on {headset.retired_on}, on or before the recording date {on_date}"
    return None
