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
    items = [
        Item("Release requests awaiting your approval", queue, url=f"{url}?state=awaiting_approval",
             attention=bool(queue), empty_text="No release request is waiting for you."),
    ]
    published = dict(ReleaseRequest.objects.filter(state__in=(State.RELEASED, State.SUPERSEDED)).values_list("state")
                     .annotate(n=Count("pk")).order_by())  # one grouped count
    superseded = published.get(State.SUPERSEDED, 0)
    # A superseded release was published too: it counts, and says so.
    items.append(Item("Releases published" + (f" ({superseded} since superseded after a withdrawal)"
                                              if superseded else ""),
                      sum(published.values()), url=f"{url}?state=released", empty_text="No release yet."))
    return items
