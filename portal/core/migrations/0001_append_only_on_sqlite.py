"""SQLite's triggers refusing UPDATE and DELETE of the append-only tables, as PostgreSQL's do since each table's
own migration. Here, after every migration that rebuilds these tables on SQLite (a rebuild drops a table's
triggers); a later one that rebuilds one must make its triggers again."""

from django.db import migrations

from portal.core.append_only import append_only_trigger

APPEND_ONLY = [
    ("audit_auditevent", "audit_event_append_only", "audit events"),
    ("audit_auditcheckpoint", "audit_checkpoint_append_only", "audit checkpoints"),
    ("audit_chainverification", "audit_verification_append_only", "chain verifications"),
    ("studies_consentevent", "studies_consent_event_append_only", "consent events"),
    ("research_agreementacceptance", "research_acceptance_append_only", "agreement acceptances"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0006_chain_verifications"),
        ("studies", "0005_headset_assigned_on"),
        ("research", "0001_initial"),
    ]
    operations = [append_only_trigger(table, trigger, what, vendors=("sqlite",))
                  for table, trigger, what in APPEND_ONLY]
