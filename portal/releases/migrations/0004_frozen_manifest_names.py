"""What the manifest names is frozen on the request, its items and its approvals: the study's code, the
requester's and each officer's username, each episode's capture id, and the number of approvals the request
needs. Existing rows take today's values (what their manifests were built from until now); requests already
submitted take their study's current number."""

from django.db import migrations, models


def freeze(apps, schema_editor):
    ReleaseRequest = apps.get_model("releases", "ReleaseRequest")
    ReleaseItem = apps.get_model("releases", "ReleaseItem")
    Approval = apps.get_model("releases", "Approval")
    for request in ReleaseRequest.objects.select_related("study", "requested_by").iterator(chunk_size=500):
        request.study_code = request.study.code
        request.requested_by_name = request.requested_by.username
        if request.state != "draft":
            request.approvals_required = request.study.approvals_required
        request.save(update_fields=["study_code", "requested_by_name", "approvals_required"])
    for item in ReleaseItem.objects.select_related("episode__recording").iterator(chunk_size=500):
        item.capture_id = item.episode.recording.capture_id
        item.save(update_fields=["capture_id"])
    for approval in Approval.objects.select_related("officer").iterator(chunk_size=500):
        approval.officer_name = approval.officer.username
        approval.save(update_fields=["officer_name"])


class Migration(migrations.Migration):

    dependencies = [
        ('releases', '0003_superseding_releases'),
    ]

    operations = [
        migrations.AddField(
            model_name='releaserequest',
            name='study_code',
            field=models.CharField(default='', help_text="The study's code when the request was made.", max_length=40),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='releaserequest',
            name='requested_by_name',
            field=models.CharField(default='', help_text="The requester's username when the request was made.", max_length=150),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='releaserequest',
            name='approvals_required',
            field=models.PositiveSmallIntegerField(blank=True, help_text="Distinct ethics officers' approvals it needs: the study's number when it was submitted.", null=True),
        ),
        migrations.AddField(
            model_name='releaseitem',
            name='capture_id',
            field=models.CharField(default='', help_text="The recording's capture id when the request was made.", max_length=128),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='approval',
            name='officer_name',
            field=models.CharField(default='', help_text="The officer's username when they approved.", max_length=150),
            preserve_default=False,
        ),
        migrations.RunPython(freeze, migrations.RunPython.noop),
    ]
