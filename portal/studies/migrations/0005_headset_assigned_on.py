from django.db import migrations, models
from django.utils import timezone


def registration_dates(apps, schema_editor):
    """Every headset registered before the field existed was the study's from its registration date."""
    Headset = apps.get_model("studies", "Headset")
    headsets = list(Headset.objects.only("pk", "registered_at"))
    for headset in headsets:
        headset.assigned_on = timezone.localdate(headset.registered_at)
    Headset.objects.bulk_update(headsets, ["assigned_on"], batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ('studies', '0004_approval_second_factor'),
    ]

    operations = [
        migrations.AddField(
            model_name='headset',
            name='assigned_on',
            field=models.DateField(default=timezone.localdate, help_text="The coordinator's declaration that the headset was the study's from this date: the registration date unless an earlier one was declared, never later.", verbose_name='in the study since'),
        ),
        migrations.RunPython(registration_dates, migrations.RunPython.noop),
    ]
