"""On PostgreSQL, a trigger refuses UPDATE and DELETE of consent events, whatever the client."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION studies_consent_event_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'consent events are append-only (% refused)', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER studies_consent_event_append_only
    BEFORE UPDATE OR DELETE ON studies_consentevent
    FOR EACH ROW EXECUTE FUNCTION studies_consent_event_append_only();
"""
DROP = """
DROP TRIGGER IF EXISTS studies_consent_event_append_only ON studies_consentevent;
DROP FUNCTION IF EXISTS studies_consent_event_append_only();
"""


def _run(sql):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql, params=None)

    return apply


class Migration(migrations.Migration):
    dependencies = [("studies", "0002_registry")]
    operations = [migrations.RunPython(_run(CREATE), _run(DROP))]
