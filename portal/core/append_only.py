"""Append-only records (audit events and checkpoints, consent events, agreement acceptances): refused in the ORM
and by a trigger in the database, on PostgreSQL and on SQLite."""

from __future__ import annotations

from django.db import migrations, models


class AppendOnlyError(Exception):
    """An append-only record was about to be changed or removed."""


class AppendOnlyQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError(f"{self.model._meta.verbose_name_plural} are append-only: update refused")

    def delete(self):
        raise AppendOnlyError(f"{self.model._meta.verbose_name_plural} are append-only: delete refused")

    _raw_delete = delete


class AppendOnlyModel(models.Model):
    """A row is written once; ``append_only_hint`` says what to do instead of changing it."""

    append_only_hint = ""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"{self._meta.verbose_name_plural} cannot be updated{self.append_only_hint}")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"{self._meta.verbose_name_plural} cannot be deleted{self.append_only_hint}")


def _postgresql(table: str, trigger: str, what: str) -> tuple[list[str], list[str]]:
    create = f"""
CREATE OR REPLACE FUNCTION {trigger}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{what} are append-only (% refused)', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER {trigger} BEFORE UPDATE OR DELETE ON {table} FOR EACH ROW EXECUTE FUNCTION {trigger}();
"""
    return [create], [f"DROP TRIGGER IF EXISTS {trigger} ON {table}; DROP FUNCTION IF EXISTS {trigger}();"]


def _sqlite(table: str, trigger: str, what: str) -> tuple[list[str], list[str]]:
    # One trigger per operation (SQLite has no TG_OP); IF NOT EXISTS, so a migration may add them to a table
    # whose trigger an earlier migration made, whatever the database's history.
    create = [f"CREATE TRIGGER IF NOT EXISTS {trigger}_{op.lower()} BEFORE {op} ON {table} "
              f"BEGIN SELECT RAISE(ABORT, '{what} are append-only ({op} refused)'); END" for op in ("UPDATE", "DELETE")]
    return create, [f"DROP TRIGGER IF EXISTS {trigger}_{op}" for op in ("update", "delete")]


_VENDORS = {"postgresql": _postgresql, "sqlite": _sqlite}


def append_only_trigger(table: str, trigger: str, what: str, *,
                        vendors: tuple[str, ...] = ("postgresql", "sqlite")) -> migrations.RunPython:
    """A migration operation that refuses UPDATE and DELETE of ``table`` for every client of the database, on the
    ``vendors`` named (PostgreSQL: the trigger ``trigger``; SQLite: ``<trigger>_update`` and ``<trigger>_delete``).

    TRUNCATE, which PostgreSQL's row triggers let through, is refused by ``truncate_trigger``; the suite's flush
    (DELETE on SQLite, TRUNCATE on PostgreSQL) steps past the triggers as tests/conftest.py says. SQLite drops a
    table's triggers when a migration rebuilds the table (most column changes do): such a migration must run this
    again afterwards (tests/portal/test_append_only.py finds a table left without them).
    """

    def run(which: int):
        def apply(apps, schema_editor):
            vendor = schema_editor.connection.vendor
            if vendor in vendors and vendor in _VENDORS:
                for sql in _VENDORS[vendor](table, trigger, what)[which]:
                    schema_editor.execute(sql, params=None)

        return apply

    return migrations.RunPython(run(0), run(1))


def truncate_trigger(table: str, trigger: str, what: str) -> migrations.RunPython:
    """A migration operation that refuses ``TRUNCATE`` of ``table`` on PostgreSQL (a statement trigger
    ``<trigger>_truncate``: row triggers do not see it, and it empties the table in one go). SQLite has no
    TRUNCATE: its DELETE is refused by ``append_only_trigger``'s triggers."""
    name = f"{trigger}_truncate"
    create = f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{what} are append-only (TRUNCATE refused)';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER {name} BEFORE TRUNCATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {name}();
"""
    drop = f"DROP TRIGGER IF EXISTS {name} ON {table}; DROP FUNCTION IF EXISTS {name}();"

    def run(sql: str):
        def apply(apps, schema_editor):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.execute(sql, params=None)

        return apply

    return migrations.RunPython(run(create), run(drop))
