"""A release superseded after a withdrawal keeps its approvals by default (new studies). Existing studies keep
the value they have: whether to carry approvals over is part of a study's approval policy, and a migration does
not change a policy a study's officers may have chosen; a coordinator or ethics officer turns it on in the
study's settings."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('studies', '0007_approval_policy_confirmation'),
    ]

    operations = [
        migrations.AlterField(
            model_name='study',
            name='carry_over_approvals',
            field=models.BooleanField(default=True, help_text="A release superseded after a withdrawal keeps its approvals (else it goes back to the ethics officers' review)."),
        ),
    ]
