"""A study's audit log as its audit view, its CSV export and its API read it: the study's events (``study_id``)
filtered by object, actor, action and time, an object's history, and the chain's status.

Every filter is a condition on indexed columns ending in ``seq``, so a page newest first is a range of one index
(``AuditEvent.Meta.indexes``). The study is named as a range of one value (``study_id BETWEEN X AND X``) and every
list and export is ordered by ``(study_id, seq)``: PostgreSQL drops an ORDER BY column that an equality fixes, and
then, for a study holding much of the log, prefers walking the whole chain's ``seq`` index backwards and filtering,
which passes every newer event of the other studies and the sign-ins (300 000 of them: 30 to 50 ms warm,
seconds cold). With the range, only ``audit_study_seq`` (``study_id``, ``seq``) gives that order: a page or an
export's chunk is a range of it, in either direction, from the study's own newest event or from the cursor.
On PostgreSQL the export is one ``COPY`` of that range read backwards (``csv_copy``; the planner is told not to
sort instead).

Histories (a recording's, a demonstrator's: ``histories``, registered by the apps
owning their objects) are the events of a few objects, found first in the small tables.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections, transaction
from django.db.models import QuerySet
from django.utils import timezone
from psycopg import sql

from portal.audit import histories
from portal.audit.models import AuditCheckpoint, AuditEvent, ChainVerification
from portal.audit.services import record
from portal.core.fixed_query import FixedQuery
from portal.core.pagination import Keyset

# The kinds of object events name, offered as suggestions in the filter (any other value filters too).
TARGET_TYPES = ("recordings.recording", "recordings.episode", "releases.releaserequest", "studies.demonstrator",
                "studies.consentevent", "studies.headset",
                "studies.consentdocument", "studies.study", "studies.datauseagreement", "access.rolegrant",
                "research.accessrequest", "research.agreementacceptance", "research.dataset", "accounts.apitoken",
                "auth.user")
# The columns a list reads (never the before/after blobs) and the order every list and export uses: the chain's
# order within the study, newest first, the columns of ``audit_study_seq`` (see the module's docstring).
LISTED = ("seq", "created_at", "actor_label", "action", "study_id", "target_type", "target_id", "target_label")
ORDER = ("-study_id", "-seq")
EXPORT_CHUNK = 5000


@dataclass(frozen=True)
class LogFilter:
    """What a study's log is narrowed to; empty fields do not filter. ``action`` ending in ``*`` is a prefix."""

    target_type: str = ""
    target_id: str = ""
    actor: str = ""
    action: str = ""
    since: date | None = None
    until: date | None = None
    recording: Any = None  # a Recording: its history (``histories.named("recording")``)
    demonstrator: Any = None  # a Demonstrator: its history

    def followed(self) -> list[tuple[histories.History, Any]]:
        """The histories the filter narrows to, each with its object."""
        return [(histories.named(name), getattr(self, name)) for name in HISTORIES if getattr(self, name) is not None]

    def as_dict(self) -> dict:
        """The filter as written into an export's audit event."""
        values = {"target_type": self.target_type, "target_id": self.target_id, "actor": self.actor,
                  "action": self.action, "since": self.since.isoformat() if self.since else "",
                  "until": self.until.isoformat() if self.until else "",
                  **{history.name: history.value(obj) for history, obj in self.followed()}}
        return {key: value for key, value in values.items() if value}


HISTORIES = ("recording", "demonstrator")  # the LogFilter's fields naming a history, in the order they are written


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def events(study, log: LogFilter = LogFilter()) -> QuerySet[AuditEvent]:
    """The study's events narrowed by ``log``, every column; lists take ``.only(*LISTED)``. Call it inside the
    study's scope when it names a recording or demonstrator (their related rows are study data)."""
    # A range of one value, not an equality: ordered by ORDER, only (study_id, seq) serves it (module docstring).
    found = AuditEvent.objects.filter(study_id__range=(study.pk, study.pk)).order_by(*ORDER)
    if log.target_type:
        found = found.filter(target_type=log.target_type)
    if log.target_id:
        found = found.filter(target_id=log.target_id)
    if log.actor:
        found = found.filter(actor_label=log.actor)
    if log.action.endswith("*"):
        found = found.filter(action__startswith=log.action[:-1])
    elif log.action:
        found = found.filter(action=log.action)
    # Whole days in the portal's time zone, as a range on the column.
    if log.since:
        found = found.filter(created_at__gte=_day_start(log.since))
    if log.until:
        found = found.filter(created_at__lt=_day_start(log.until + timedelta(days=1)))
    for history, obj in log.followed():
        found = found.filter(history.events(obj))
    return found


def whose_history(study, target_type: str, target_id: str) -> tuple[str, str, str] | None:
    """For the object an event names, the wider history it belongs to: ("recording", uid, label) for a recording
    or its episode, ("demonstrator", designator, designator) for a demonstrator or one of its consent events;
    None for any other object or one no longer there."""
    history = histories.belonging(target_type)
    if history is None or not target_id.isdigit():
        return None
    owner = history.owner(target_type, int(target_id))
    return (history.name, *owner) if owner else None


# --- the CSV export -----------------------------------------------------------------------------------------

CSV_COLUMNS = ("seq", "time", "actor", "actor_id", "action", "target_type", "target_id", "target", "before", "after",
               "hash")
# A spreadsheet reads a cell starting with one of these as a formula: such a cell is written with a leading '.
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return f"'{text}" if text.startswith(_FORMULA) else text


def _json(value) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False, cls=DjangoJSONEncoder)


def head_seq() -> int:
    return AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0


# What each CSV line is made of, read as plain values (no model instance per row).
_EXPORTED = ("seq", "created_at", "actor_label", "actor_id", "action", "target_type", "target_id", "target_label",
             "before", "after", "hash")


def csv_lines(found: QuerySet[AuditEvent], *, upto: int) -> Iterator[str]:
    """``found`` (events up to ``upto``) newest first as CSV text, one piece per chunk of ``EXPORT_CHUNK`` events:
    every matching event, however many, each chunk one query, a range of the list's index from where the last one
    ended (``(study_id, seq) < (study, last seq)``), so memory stays that of one chunk."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    yield buffer.getvalue()
    keyset = Keyset(*ORDER)
    rows = found.order_by(*ORDER).filter(seq__lte=upto)
    position = None
    while True:
        page = rows if position is None else keyset.beyond(rows, position, backwards=False)
        chunk = list(page.values_list("study_id", *_EXPORTED)[:EXPORT_CHUNK])
        if not chunk:
            return
        buffer.seek(0)
        buffer.truncate()
        writer.writerows(
            (seq, created.isoformat(timespec="microseconds"), _cell(actor), "" if actor_id is None else actor_id,
             _cell(action), _cell(target_type), _cell(target_id), _cell(target), _json(before), _json(after), hash_)
            for _, seq, created, actor, actor_id, action, target_type, target_id, target, before, after, hash_
            in chunk)
        yield buffer.getvalue()
        position = [chunk[-1][0], chunk[-1][1]]


# PostgreSQL's COPY writes the same CSV (``csv_copy``): each column as ``csv_lines`` writes it, by SQL. An empty
# value is NULL, which COPY writes as nothing (Python's csv writes an empty string so; COPY would quote it).
def _cell_sql(column: str) -> str:
    return (f"CASE WHEN left({column}, 1) IN ('=', '+', '-', '@', E'\\t', E'\\r') THEN '''' || {column} "
            f"ELSE nullif({column}, '') END")


_COPY_SELECT = ", ".join((
    "e.seq",
    # created_at.isoformat(timespec="microseconds") of the UTC datetime Django reads.
    "to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '+00:00'",
    _cell_sql("e.actor_label"), "e.actor_id", _cell_sql("e.action"), _cell_sql("e.target_type"),
    _cell_sql("e.target_id"), _cell_sql("e.target_label"),
    # json.dumps(value, sort_keys=True, ensure_ascii=False) of the value read: migration 0008's function.
    "audit_csv_json(e.before)", "audit_csv_json(e.after)", "nullif(e.hash, '')"))


def copy_select(found: QuerySet[AuditEvent], *, upto: int) -> tuple[sql.Composed, list]:
    """The query ``csv_copy`` has COPY write out, and its values: ``found``'s own (its values still
    placeholders) up to ``upto``, in the list's order, each column formatted as ``csv_lines`` formats it."""
    inner, params = found.order_by(*ORDER).filter(seq__lte=upto).values_list(
        "study_id", *_EXPORTED).query.sql_with_params()
    select = sql.SQL("SELECT {} FROM ({}) AS e ORDER BY e.study_id DESC, e.seq DESC").format(
        sql.SQL(_COPY_SELECT), sql.SQL(inner))
    return select, list(params)


def csv_copy(found: QuerySet[AuditEvent], *, upto: int) -> Iterator[bytes]:
    """What ``csv_lines`` writes, byte for byte, written by PostgreSQL's ``COPY ... TO STDOUT (FORMAT csv)``:
    one query however many events, its rows streamed as they come and sent on in pieces of ``EXPORT_CHUNK`` rows
    (memory stays that of one piece). The rows are ``found``'s own query (the study's range and the filters,
    their values bound by psycopg as literals: ``COPY`` takes no server-side parameters) with each column
    formatted in SQL. COPY ends a row with LF, Python's csv with CR LF: a row is one message of the COPY protocol
    (the server always sends it so), so its last byte is the one to change; a line break inside a quoted value
    stays as it is in both."""
    select, params = copy_select(found, upto=upto)
    statement = sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv)").format(select)
    header = io.StringIO()
    csv.writer(header).writerow(CSV_COLUMNS)
    return _copied(connections[found.db], statement, params, header.getvalue().encode())


# The order of ``audit_study_seq`` read backwards, whatever the planner thinks of a study holding much of the log:
# rows leave as they are read (no sort of the whole study first, on disk, before the first byte).
COPY_PLAN = "SET LOCAL enable_sort = off"


def _copied(connection, statement: sql.Composed, params, header: bytes) -> Iterator[bytes]:
    yield header
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(COPY_PLAN)
        with cursor.cursor.copy(statement, params) as copy:
            try:
                yield from _pieces(copy)
            except GeneratorExit:
                # The client went away mid-COPY. Closing the connection ends the COPY and its transaction on the
                # server at once (a cancel, psycopg's way, is a signal from another connection that may land on
                # the ROLLBACK after it); the next request opens another connection.
                connection.close()


def _pieces(copy) -> Iterator[bytes]:
    piece: list[bytes] = []
    for data in copy:
        row = bytes(data)
        if not row.endswith(b"\n"):
            raise RuntimeError("COPY sent part of a row: the audit CSV expects one row per message")
        piece.append(row[:-1])
        if len(piece) == EXPORT_CHUNK:
            yield b"\r\n".join(piece) + b"\r\n"
            piece = []
    if piece:
        yield b"\r\n".join(piece) + b"\r\n"


def export_csv(user, study, log: LogFilter) -> Iterator[str] | Iterator[bytes]:
    """The study's events narrowed by ``log`` as CSV lines, up to the newest event at this moment; the export
    itself is an audit event (who, which filters, up to which seq), just after what it exports. PostgreSQL
    writes the CSV with COPY (``csv_copy``), SQLite through Python (``csv_lines``); the bytes are the same."""
    upto = head_seq()
    record(user, "audit.exported", study, after={"filters": log.as_dict(), "upto_seq": upto})
    found = events(study, log)
    if connections[found.db].vendor == "postgresql":
        return csv_copy(found, upto=upto)
    return csv_lines(found, upto=upto)


# --- the chain's status -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainStatus:
    verification: ChainVerification | None
    checkpoint: AuditCheckpoint | None


def _fields(model, *names: str) -> list[str]:
    """The attnames of ``model``'s fields (all of them without ``names``), in the model's order."""
    return [field.attname for field in model._meta.concrete_fields if not names or field.attname in names]


# Asked by every audit page, the same two queries each time: compiled once per process (``core.fixed_query``).
_NEWEST_VERIFICATION = FixedQuery(
    lambda: ChainVerification.objects.order_by("-started_at", "-pk").values_list(*_fields(ChainVerification))[:1])
_NEWEST_CHECKPOINT = FixedQuery(lambda: AuditCheckpoint.objects.order_by("-created_at", "-pk").values_list(
    *_fields(AuditCheckpoint, "id", "seq", "created_at", "name"))[:1])


def chain_status() -> ChainStatus:
    """The newest full verification and the newest checkpoint the portal noted (the audit view shows both)."""
    verification = _NEWEST_VERIFICATION.instances(ChainVerification)
    checkpoint = _NEWEST_CHECKPOINT.instances(AuditCheckpoint)
    return ChainStatus(verification=verification[0] if verification else None,
                       checkpoint=checkpoint[0] if checkpoint else None)
