"""Carry the plain-text keys of Django REST framework's ``authtoken`` table over as hashed ApiTokens.

Each old key keeps working (now expiring after 90 days), and the table that held the keys in plain
text is dropped, with its migration records, since the app is no longer installed.
"""

import hashlib
from datetime import timedelta

from django.db import migrations
from django.utils import timezone


def hash_existing_keys(apps, schema_editor):
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id FROM authtoken_token")
        rows = cursor.fetchall()
    expires_at = timezone.now() + timedelta(days=90)
    ApiToken.objects.bulk_create([
        ApiToken(user_id=user_id, name="API token made before tokens expired", prefix=key[:8],
                 key_hash=hashlib.sha256(key.encode("utf-8")).hexdigest(), expires_at=expires_at)
        for key, user_id in rows
    ])
    schema_editor.execute("DROP TABLE authtoken_token")
    schema_editor.execute("DELETE FROM django_migrations WHERE app = 'authtoken'")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunPython(hash_existing_keys, migrations.RunPython.noop)]
