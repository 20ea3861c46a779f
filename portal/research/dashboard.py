"""Dashboard items of researcher access: what a researcher can download and what stands in the way; the access
requests waiting for a study's coordinators and ethics officers."""

from django.urls import reverse
from django.utils import timezone

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.research.exceptions import AccessRefused
from portal.research.models import AccessRequest, DatasetRequester
from portal.research.services import access, catalogue


@register(Role.RESEARCHER)
def researcher_items(study, user):
    items = []
    try:
        access.check_access(user, study)
    except AccessRefused as refused:
        items.append(Item(str(refused).capitalize(), url=reverse("research-agreement", args=[study.code]),
                          attention=True))
    grant = access.researcher_grant(user, study)
    if grant is not None and grant.expires_at is not None:
        items.append(Item(f"Your access ends on {timezone.localtime(grant.expires_at):%Y-%m-%d}",
                          url=reverse("research-home")))
    released = catalogue.released_items().count()
    items.append(Item("Released episodes you can browse", released, url=reverse("research-browse", args=[study.code]),
                      empty_text="No episode of this study is released yet. Released episodes appear here once "
                                 "ethics officers approve a release."))
    datasets = DatasetRequester.objects.filter(user=user).count()
    items.append(Item("Your one-dataset downloads", datasets, url=reverse("research-datasets", args=[study.code]),
                      empty_text="None yet: tick released episodes and build one dataset from them."))
    return items


def _steward_items(study, user):
    waiting = AccessRequest.objects.filter(study=study, state=AccessRequest.State.PENDING).count()
    url = reverse("research-access-requests", args=[study.code])
    return [Item("Access requests waiting for a decision", waiting, url=f"{url}?state=pending",
                 attention=bool(waiting), empty_text="No researcher is waiting for access.")]


register(Role.COORDINATOR)(_steward_items)
register(Role.ETHICS_OFFICER)(_steward_items)
