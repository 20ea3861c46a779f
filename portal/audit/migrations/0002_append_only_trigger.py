from django.db import migrations

from portal.core.append_only import append_only_trigger


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    # PostgreSQL only: on SQLite later migrations rebuild the table (dropping its triggers); core 0001 makes them.
    operations = [append_only_trigger("audit_auditevent", "audit_event_append_only", "audit events",
                                      vendors=("postgresql",))]
