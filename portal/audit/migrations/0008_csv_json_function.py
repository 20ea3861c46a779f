"""PostgreSQL's side of the audit CSV (``study_log.csv_copy``): ``audit_csv_json(jsonb)`` writes an event's
``before`` or ``after`` as the Python path writes it (``json.dumps(value, sort_keys=True, ensure_ascii=False)``
of the value read back), so that ``COPY`` gives the same bytes. jsonb's own text differs in two ways only: it
orders an object's keys by length first, and a number with a decimal point is Python's float (``1e-05``,
``1.5``, ``3.0``) only once read as one. Values with neither (no object of two or more keys, no decimal point:
most events) are jsonb's text as it is; the others are rewritten by ``audit_csv_json_sorted``. A top-level JSON
``null`` is SQL NULL, as Python reads it (``None``: an empty cell). Nothing on SQLite, whose export is Python's."""

from django.db import migrations

CREATE = r"""
CREATE OR REPLACE FUNCTION audit_csv_float(value float8) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET extra_float_digits = 1 AS $fn$
-- Python's repr of a float: PostgreSQL's shortest digits, but Python writes 1e15 <= |x| < 1e16 without an
-- exponent and an integral float with ".0".
DECLARE
  shown text := value::text;
  digits text;
BEGIN
  IF shown ~ 'e\+15$' THEN
    digits := replace(ltrim(split_part(shown, 'e', 1), '-'), '.', '');
    digits := digits || repeat('0', greatest(16 - length(digits), 0));
    RETURN CASE WHEN value < 0 THEN '-' ELSE '' END || left(digits, 16) || '.'
           || coalesce(nullif(substr(digits, 17), ''), '0');
  END IF;
  IF strpos(shown, 'e') = 0 AND strpos(shown, '.') = 0 THEN
    RETURN shown || '.0';
  END IF;
  RETURN shown;
END
$fn$;

CREATE OR REPLACE FUNCTION audit_csv_json_sorted(value jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
-- json.dumps(value, sort_keys=True, ensure_ascii=False) of the value as Python reads it: keys in code point
-- order (UTF-8's byte order), ", " and ": " between, strings escaped as jsonb escapes them (as Python does).
DECLARE
  kind text := jsonb_typeof(value);
  shown text;
BEGIN
  IF kind = 'object' THEN
    RETURN '{' || coalesce((SELECT string_agg(to_jsonb(key)::text || ': ' || audit_csv_json_sorted(item), ', '
                                              ORDER BY key COLLATE "C")
                            FROM jsonb_each(value) AS member(key, item)), '') || '}';
  ELSIF kind = 'array' THEN
    RETURN '[' || coalesce((SELECT string_agg(audit_csv_json_sorted(item), ', ' ORDER BY n)
                            FROM jsonb_array_elements(value) WITH ORDINALITY AS element(item, n)), '') || ']';
  END IF;
  shown := value::text;
  IF kind = 'number' AND strpos(shown, '.') > 0 THEN
    RETURN audit_csv_float(shown::float8);
  END IF;
  RETURN shown;
END
$fn$;

-- Not STRICT and one expression, so that PostgreSQL inlines it into the COPY's query.
CREATE OR REPLACE FUNCTION audit_csv_json(value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
  SELECT CASE WHEN value = 'null'::jsonb THEN NULL
              WHEN value::text !~ '[0-9]\.|, "' THEN value::text
              ELSE audit_csv_json_sorted(value) END
$fn$;
"""

DROP = """
DROP FUNCTION IF EXISTS audit_csv_json(jsonb);
DROP FUNCTION IF EXISTS audit_csv_json_sorted(jsonb);
DROP FUNCTION IF EXISTS audit_csv_float(float8);
"""


def _on_postgresql(sql: str):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)

    return apply


class Migration(migrations.Migration):
    dependencies = [("audit", "0007_audit_view_indexes")]
    operations = [migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP))]
