from django.db.models import Count
from django.urls import reverse

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.fixity.models import Alert


@register(Role.ETHICS_OFFICER)
def ethics_items(study, user):
    # One grouped count, from the alerts' (study, state, ...) index.
    counts = dict(Alert.objects.filter(state__in=Alert.UNRESOLVED).values_list("state").annotate(n=Count("*"))
                  .order_by())
    return [
        Item("Integrity alerts not yet resolved", sum(counts.values()), url=reverse("alert-list", args=[study.code]),
             attention=bool(counts.get(Alert.State.OPEN)),
             empty_text="Every stored shard and released object matched its record at its last check."),
    ]
