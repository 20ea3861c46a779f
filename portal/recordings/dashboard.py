from django.db.models import Count
from django.urls import reverse

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.recordings.models import Episode, Recording


def _counts(queryset, field: str, values: list[str]) -> dict[str, int]:
    """Rows per value of ``field`` among ``values``: one grouped query, an index-only range per value (COUNT(*)
    needs no column outside the index)."""
    rows = queryset.filter(**{f"{field}__in": values}).values(field).annotate(n=Count("*")).order_by()
    return {row[field]: row["n"] for row in rows}


@register(Role.COORDINATOR)
def coordinator_items(study, user):
    url = reverse("recording-list", args=[study.code])
    states = _counts(Recording.objects, "state", [Recording.State.QUARANTINED, Recording.State.FAILED])
    quarantined = states.get(Recording.State.QUARANTINED, 0)
    failed = states.get(Recording.State.FAILED, 0)
    verified = _counts(Episode.objects, "receipt_status", [Episode.Receipt.VERIFIED]).get(Episode.Receipt.VERIFIED, 0)
    return [
        Item("Recordings in quarantine", quarantined, url=f"{url}?state=quarantined", attention=bool(quarantined),
             empty_text="No recording is quarantined."),
        Item("Exports failed", failed, url=f"{url}?state=failed", attention=bool(failed),
             empty_text="No failed export."),
        Item("Episodes verified", verified, url=reverse("episode-list", args=[study.code]),
             empty_text="No episode yet: upload a capture source on the recordings page."),
    ]
