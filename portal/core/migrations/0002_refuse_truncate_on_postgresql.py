"""PostgreSQL's statement triggers refusing TRUNCATE of the append-only tables: their row triggers refuse UPDATE and
DELETE but do not see TRUNCATE, which empties a table in one statement (the audit log among them)."""

from django.db import migrations

from portal.core.append_only import truncate_trigger

APPEND_ONLY = [
    ("audit_auditevent", "audit_event_append_only", "audit events"),
    ("audit_auditcheckpoint", "audit_checkpoint_append_only", "audit checkpoints"),
    ("audit_chainverification", "audit_verification_append_only", "chain verifications"),
    ("studies_consentevent", "studies_consent_event_append_only", "consent events"),
    ("research_agreementacceptance", "research_acceptance_append_only", "agreement acceptances"),
]


class Migration(migrations.Migration):
    dependencies = [("core", "0001_append_only_on_sqlite")]
    operations = [truncate_trigger(table, trigger, what) for table, trigger, what in APPEND_ONLY]
