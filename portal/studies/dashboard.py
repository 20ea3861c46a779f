from django.urls import reverse

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.studies.models import Headset


@register(Role.COORDINATOR)
def coordinator_items(study, user):
    return [
        Item("Headsets registered", Headset.objects.filter(retired_on__isnull=True).count(),
             url=reverse("study-overview", args=[study.code]),
             empty_text="No headsets yet: register the study's headsets before recordings can be ingested."),
    ]
