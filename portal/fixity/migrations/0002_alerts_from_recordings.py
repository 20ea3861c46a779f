"""The alerts of recordings (a shard that failed its receipt verification) become the general alerts of
portal.fixity: same study, episode, message and time; resolved ones stay resolved (the old rows had no note)."""

from django.db import migrations


def copy_alerts(apps, schema_editor):
    Old = apps.get_model("recordings", "Alert")
    New = apps.get_model("fixity", "Alert")
    rows = [New(study_id=old.study_id, episode_id=old.episode_id, kind="receipt_mismatch", message=old.message,
                created_at=old.created_at, state="resolved" if old.resolved_at else "open",
                resolved_at=old.resolved_at,
                resolved_note="resolved before alerts had notes" if old.resolved_at else "")
            for old in Old._base_manager.order_by("pk").iterator(chunk_size=2000)]
    New._base_manager.bulk_create(rows, batch_size=2000)


def copy_back(apps, schema_editor):
    Old = apps.get_model("recordings", "Alert")
    New = apps.get_model("fixity", "Alert")
    Old._base_manager.bulk_create(
        [Old(study_id=new.study_id, episode_id=new.episode_id, message=new.message, resolved_at=new.resolved_at)
         for new in New._base_manager.filter(kind="receipt_mismatch").order_by("pk")], batch_size=2000)


class Migration(migrations.Migration):

    dependencies = [
        ("fixity", "0001_initial"),
        ("recordings", "0004_list_indexes"),
    ]

    operations = [migrations.RunPython(copy_alerts, copy_back)]
