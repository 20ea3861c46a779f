from django.db import migrations

from portal.core.append_only import append_only_trigger


class Migration(migrations.Migration):
    dependencies = [("studies", "0002_registry")]
    operations = [
        # PostgreSQL only: SQLite's come with core 0001.
        append_only_trigger("studies_consentevent", "studies_consent_event_append_only", "consent events",
                            vendors=("postgresql",)),
    ]
