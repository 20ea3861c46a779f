from django.urls import reverse

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.studies.models import ConsentDocument, Demonstrator, Headset


@register(Role.COORDINATOR)
def coordinator_items(study, user):
    pending = ConsentDocument.objects.filter(accepted_at__isnull=True).count()
    return [
        Item("Headsets registered", Headset.objects.filter(retired_on__isnull=True).count(),
             url=reverse("study-headsets", args=[study.code]),
             empty_text="No headsets yet: register the study's headsets before recordings can be ingested."),
        Item("Demonstrators", Demonstrator.objects.count(), url=reverse("study-demonstrators", args=[study.code]),
             empty_text="No demonstrators yet: create one per person, with a generated designator."),
        Item("Consent documents awaiting acceptance", pending,
             url=reverse("study-consent-documents", args=[study.code])),
    ]


@register(Role.ETHICS_OFFICER)
def ethics_officer_items(study, user):
    pending = ConsentDocument.objects.filter(accepted_at__isnull=True).count()
    return [
        Item("Consent documents to accept", pending, url=reverse("study-consent-documents", args=[study.code]),
             empty_text="No consent document is waiting for you.", attention=pending > 0),
    ]
