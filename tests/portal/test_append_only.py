"""Every append-only table has the database's triggers refusing UPDATE and DELETE, on PostgreSQL and on SQLite
(whichever the suite runs on), and the suite's flush of transactional tests empties them without leaving them
unguarded."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from portal.audit.models import AuditEvent
from portal.audit.services import record
from portal.core.append_only import AppendOnlyModel

# table -> the trigger its migrations make (on SQLite as <name>_update and <name>_delete).
TRIGGERS = {
    "audit_auditevent": "audit_event_append_only",
    "audit_auditcheckpoint": "audit_checkpoint_append_only",
    "audit_chainverification": "audit_verification_append_only",
    "studies_consentevent": "studies_consent_event_append_only",
    "research_agreementacceptance": "research_acceptance_append_only",
}


def _triggers(table: str) -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger JOIN pg_class ON pg_class.oid = tgrelid "
                           "WHERE relname = %s AND NOT tgisinternal AND tgenabled = 'O'", [table])
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table])
        return {row[0] for row in cursor.fetchall()}


def _expected(trigger: str) -> set[str]:
    # PostgreSQL: the row trigger (UPDATE, DELETE) and the statement trigger (TRUNCATE).
    return ({trigger, f"{trigger}_truncate"} if connection.vendor == "postgresql"
            else {f"{trigger}_update", f"{trigger}_delete"})


def test_every_append_only_model_is_listed():
    assert set(TRIGGERS) == {model._meta.db_table for model in apps.get_models() if issubclass(model, AppendOnlyModel)}


@pytest.mark.django_db
def test_every_append_only_table_has_its_triggers():
    """A migration that rebuilds one of these tables on SQLite drops its triggers: this notices."""
    assert {table: _triggers(table) for table in TRIGGERS} == {table: _expected(t) for table, t in TRIGGERS.items()}


@pytest.mark.django_db
def test_raw_sql_is_refused_for_an_audit_event():
    record("tester", "test.event", None)
    for sql in ("UPDATE audit_auditevent SET action = 'x'", "DELETE FROM audit_auditevent"):
        with pytest.raises(DatabaseError, match=r"audit events are append-only \((UPDATE|DELETE) refused\)"), \
                transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)
    assert AuditEvent.objects.get().action == "test.event"


@pytest.mark.django_db
def test_truncate_is_refused_for_every_append_only_table():
    """TRUNCATE empties a table in one statement and PostgreSQL's row triggers do not see it: a statement trigger
    refuses it (SQLite has no TRUNCATE; its DELETE is refused above)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (set DATABASE_URL): SQLite has no TRUNCATE")
    record("tester", "test.event", None)
    for table in TRIGGERS:
        with pytest.raises(DatabaseError, match=r"are append-only \(TRUNCATE refused\)"), transaction.atomic(), \
                connection.cursor() as cursor:
            cursor.execute(f'TRUNCATE "{table}" CASCADE')
    assert AuditEvent.objects.get().action == "test.event"


@pytest.mark.django_db(transaction=True)
def test_the_suites_flush_empties_append_only_tables_and_keeps_their_triggers(monkeypatch):
    record("tester", "test.event", None)
    # Django's own flush is refused: DELETE on SQLite by the row triggers, TRUNCATE on PostgreSQL by the statement
    # triggers.
    operations = type(connection.ops)
    with monkeypatch.context() as patch:
        patch.setattr(operations, "sql_flush", operations.sql_flush.__wrapped__)
        with pytest.raises(CommandError) as refused:
            call_command("flush", interactive=False, verbosity=0)
    operation = "TRUNCATE" if connection.vendor == "postgresql" else "DELETE"
    assert f"append-only ({operation} refused)" in str(refused.value.__cause__)
    assert AuditEvent.objects.count() == 1
    call_command("flush", interactive=False, verbosity=0)
    assert not AuditEvent.objects.exists()
    assert {table: _triggers(table) for table in TRIGGERS} == {table: _expected(t) for table, t in TRIGGERS.items()}
