from django.urls import reverse

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.recordings.models import Alert, Episode, Recording


@register(Role.COORDINATOR)
def coordinator_items(study, user):
    url = reverse("recording-list", args=[study.code])
    quarantined = Recording.objects.filter(state=Recording.State.QUARANTINED).count()
    failed = Recording.objects.filter(state=Recording.State.FAILED).count()
    return [
        Item("Recordings in quarantine", quarantined, url=f"{url}?state=quarantined", attention=bool(quarantined),
             empty_text="No recording is quarantined."),
        Item("Exports failed", failed, url=f"{url}?state=failed", attention=bool(failed),
             empty_text="No failed export."),
        Item("Episodes verified", Episode.objects.filter(receipt_status=Episode.Receipt.VERIFIED).count(),
             url=reverse("episode-list", args=[study.code]),
             empty_text="No episode yet: upload a capture source on the recordings page."),
    ]


@register(Role.ETHICS_OFFICER)
def ethics_items(study, user):
    alerts = Alert.objects.filter(resolved_at__isnull=True).count()
    return [
        Item("Shard integrity alerts", alerts, url=reverse("episode-list", args=[study.code]), attention=bool(alerts),
             empty_text="Every stored shard matched its receipt at its last check."),
    ]
