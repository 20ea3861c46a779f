"""What a release made by a withdrawal names in its manifest: the release it supersedes (number and manifest
digest), the withdrawal and the approvals it carries. Requests made before keep an empty value (their manifests
name only the release they supersede, as they were approved)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('releases', '0004_frozen_manifest_names'),
    ]

    operations = [
        migrations.AddField(
            model_name='releaserequest',
            name='superseding',
            field=models.JSONField(blank=True, default=dict, help_text='What the release it supersedes, the withdrawal and the approvals it carries are, as its manifest names them.'),
        ),
    ]
