from django.db import migrations, models


class Migration(migrations.Migration):
    """Events written so far were hashed with plain SHA-256 (version 1); the services write keyed events
    (version 2) from here on and the column has no default."""

    dependencies = [
        ('audit', '0003_list_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditevent',
            name='hash_version',
            field=models.PositiveSmallIntegerField(default=1, editable=False),
            preserve_default=False,
        ),
    ]
