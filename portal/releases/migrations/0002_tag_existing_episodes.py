"""Tags (tasks, outcomes) of the episodes verified before the release filters existed, from their recordings'
summaries (recordings ingested before outcomes were summarised get their tasks only)."""

from django.db import migrations


def tag_existing(apps, schema_editor):
    Episode = apps.get_model("recordings", "Episode")
    EpisodeTag = apps.get_model("releases", "EpisodeTag")
    tags = []
    for episode in Episode.objects.filter(receipt_status="verified").select_related("recording").iterator():
        summary = episode.recording.summary or {}
        tags += [EpisodeTag(study_id=episode.study_id, episode=episode, kind="task", value=task[:500])
                 for task in summary.get("tasks", [])]
        tags += [EpisodeTag(study_id=episode.study_id, episode=episode, kind="outcome", value=outcome[:500])
                 for outcome in summary.get("outcomes", [])]
    EpisodeTag.objects.bulk_create(tags, ignore_conflicts=True, batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [("releases", "0001_initial")]

    operations = [migrations.RunPython(tag_existing, migrations.RunPython.noop)]
