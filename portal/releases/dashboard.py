"""Dashboard items of releases: the coordinator's requests by where they stand, the ethics officers' queue."""

from django.db.models import Count
from django.urls import reverse

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.releases.models import ReleaseRequest
from portal.releases.services.approval import awaiting_officer

State = ReleaseRequest.State


@register(Role.COORDINATOR)
def coordinator_items(study, user):
    url = reverse("release-list", args=[study.code])
    mine = dict(ReleaseRequest.objects.filter(requested_by=user).values_list("state")
                .annotate(n=Count("pk")).order_by())  # one grouped count
    drafts, waiting, failed = (mine.get(state, 0) for state in (State.DRAFT, State.AWAITING_APPROVAL, State.FAILED))
    return [
        Item("Your release requests in draft", drafts, url=f"{url}?state=draft&mine=1",
             empty_text="No draft: ask for a release on the releases page."),
        Item("Your requests awaiting approval", waiting, url=f"{url}?state=awaiting_approval&mine=1",
             empty_text="None of your requests is waiting for ethics officers."),
        Item("Releases failed", failed, url=f"{url}?state=failed&mine=1", attention=bool(failed),
             empty_text="No release has failed."),
    ]


@register(Role.ETHICS_OFFICER)
def ethics_items(study, user):
    url = reverse("release-list", args=[study.code])
    queue = awaiting_officer(user).count()
    return [
        Item("Release requests awaiting your approval", queue, url=f"{url}?state=awaiting_approval",
             attention=bool(queue), empty_text="No release request is waiting for you."),
        Item("Releases published", ReleaseRequest.objects.filter(state=State.RELEASED).count(),
             url=f"{url}?state=released", empty_text="No release yet."),
    ]
