"""Dashboard items of researcher access: what a researcher can download and what stands in the way; the access
requests waiting for a study's coordinators and ethics officers."""

from django.urls import reverse
from django.utils import timezone

from portal.access.models import Role
from portal.core.dashboard import Item, register
from portal.research.models import AccessRequest, DatasetRequester, Withdrawal
from portal.research.services import access, catalogue


@register(Role.RESEARCHER)
def researcher_items(study, user):
    items = []
    problem = access.access_problem(user, study)
    if problem:
        items.append(Item(problem.capitalize(), url=reverse("research-agreement", args=[study.code]), attention=True))
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
                 attention=bool(waiting), empty_text="No researcher is waiting for access."),
            withdrawals_item(study)]


def withdrawals_item(study) -> Item:
    """The study's consent withdrawals and their reach (episodes removed, releases superseded, one-dataset
    downloads removed, researchers told); attention while one is not done."""
    rows = list(Withdrawal.objects.filter(study=study).values_list("state", "reach"))
    reaches = [reach or {} for _, reach in rows]
    unfinished = sum(1 for state, _ in rows if state != Withdrawal.State.DONE)
    reach = (f"reach: {sum(len(r.get('episodes', [])) for r in reaches)} episode(s), "
             f"{sum(len(r.get('releases', [])) for r in reaches)} release(s) superseded, "
             f"{sum(len(r.get('datasets', [])) for r in reaches)} one-dataset download(s) removed, "
             f"{sum(len(r.get('researchers', [])) for r in reaches)} researcher(s) who had downloaded them")
    label = "Consent withdrawals" + (f" ({reach}" + (f"; {unfinished} not done yet" if unfinished else "") + ")"
                                     if rows else "")
    return Item(label, len(rows), url=reverse("research-withdrawals", args=[study.code]), attention=bool(unfinished),
                empty_text="No demonstrator has withdrawn consent.")


register(Role.COORDINATOR)(_steward_items)
register(Role.ETHICS_OFFICER)(_steward_items)
