"""Append-only records (audit events, consent events): refused in the ORM and, on PostgreSQL, by a trigger."""

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


def append_only_trigger(table: str, trigger: str, what: str) -> migrations.RunPython:
    """A migration operation that, on PostgreSQL, refuses UPDATE and DELETE of ``table`` for every client.

    TRUNCATE stays possible, so test suites can still flush tables.
    """
    create = f"""
CREATE OR REPLACE FUNCTION {trigger}() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{what} are append-only (% refused)', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER {trigger} BEFORE UPDATE OR DELETE ON {table} FOR EACH ROW EXECUTE FUNCTION {trigger}();
"""
    drop = f"DROP TRIGGER IF EXISTS {trigger} ON {table}; DROP FUNCTION IF EXISTS {trigger}();"

    def run(sql: str):
        def apply(apps, schema_editor):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.execute(sql, params=None)

        return apply

    return migrations.RunPython(run(create), run(drop))
