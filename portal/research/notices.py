"""What researchers and the study's officers are told of access requests, datasets and withdrawals, each composed
once (``notifications.services.notify``): the research services call these in the transaction of the change (one
line each), and beat's daily task the access reminders. The texts say what the recipient may already see on the
object's page and no more: study, release, dataset or request, the decision and its reason; never a designator,
headset or episode content."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django_scopes import scopes_disabled

from portal.core.roles import Role
from portal.notifications.models import Kind, Notification
from portal.notifications.services import holders, notify, others
from portal.releases.models import ReleaseRequest
from portal.research.models import AccessRequest, Dataset, DatasetRequester, Tombstone

REMINDER_DAYS = (14, 3)


# --- access ------------------------------------------------------------------------------------------------


def access_requested(access) -> None:
    study = access.study
    notify(others(holders(study, Role.ETHICS_OFFICER), access.researcher), Kind.ACCESS_AWAITS_DECISION,
           study=study, title=f"{access.researcher.get_username()} asks for access to study {study.code}",
           body="Grant it until a date, or refuse it with a reason.",
           link=reverse("research-access-requests", args=[study.code]))


def access_decided(access) -> None:
    """Granted, refused or revoked: the researcher is told."""
    State = AccessRequest.State
    study = access.study
    if access.state == State.GRANTED:
        notify([access.researcher], Kind.ACCESS_GRANTED, study=study,
               title=f"Your access to study {study.code} was granted",
               body=f"Until {access.expires_at:%Y-%m-%d %H:%M} UTC. Its released episodes are open to you.",
               link=reverse("research-browse", args=[study.code]))
    elif access.state == State.REFUSED:
        notify([access.researcher], Kind.ACCESS_REFUSED, study=study,
               title=f"Your access to study {study.code} was refused", body=f"Reason: {access.reason}",
               link=reverse("research-home"))
    elif access.state == State.REVOKED:
        notify([access.researcher], Kind.ACCESS_REVOKED, study=study,
               title=f"Your access to study {study.code} was revoked", body=f"Reason: {access.reason}",
               link=reverse("research-home"))


def access_reminders(now=None) -> int:
    """Beat's daily look at granted access: the researcher is told 14 and 3 days before it ends, and once it
    has ended (each once per decision). Only a researcher's latest-ending granted access of a study counts: one
    a later decision extended is not said to end."""
    now = now or timezone.now()
    told = 0
    with scopes_disabled():
        granted = AccessRequest.objects.filter(state=AccessRequest.State.GRANTED, expires_at__isnull=False,
                                               expires_at__lte=now + timedelta(days=max(REMINDER_DAYS)))
        for access in granted.select_related("study", "researcher").order_by("pk"):
            later = AccessRequest.objects.filter(
                Q(expires_at__gt=access.expires_at) | Q(expires_at=access.expires_at, pk__gt=access.pk),
                study=access.study, researcher=access.researcher, state=AccessRequest.State.GRANTED)
            if later.exists():
                continue
            study, left = access.study, access.expires_at - now
            if left <= timedelta(0):
                told += len(notify(
                    [access.researcher], Kind.ACCESS_EXPIRED, study=study,
                    title=f"Your access to study {study.code} expired",
                    body=f"It ended at {access.expires_at:%Y-%m-%d %H:%M} UTC. Ask again to go on downloading.",
                    link=reverse("research-home"), key=f"access-expired:{access.pk}"))
                continue
            days = min(d for d in REMINDER_DAYS if left <= timedelta(days=d))
            told += len(notify(
                [access.researcher], Kind.ACCESS_EXPIRING, study=study,
                title=f"Your access to study {study.code} ends in {days} days or less",
                body=f"It ends at {access.expires_at:%Y-%m-%d %H:%M} UTC. Ask again before then to go on "
                     f"downloading.", link=reverse("research-home"), key=f"access-expiring-{days}:{access.pk}"))
    return told


def dataset_moved(dataset) -> None:
    """Ready or failed: everyone who asked for it is told (identical selections share one dataset)."""
    study = dataset.study
    link = reverse("research-dataset", args=[study.code, dataset.number])
    askers = [dataset.requested_by, *(r.user for r in DatasetRequester.objects.filter(dataset=dataset)
                                      .select_related("user").order_by("pk"))]
    if dataset.state == Dataset.State.READY:
        notify(askers, Kind.DATASET_READY, study=study,
               title=f"{dataset.dataset_id} of study {study.code} is ready",
               body="Download it from its page, or with ceres-pull.", link=link)
    elif dataset.state == Dataset.State.FAILED:
        notify(askers, Kind.DATASET_FAILED, study=study,
               title=f"{dataset.dataset_id} of study {study.code} failed", body=dataset.last_error, link=link)


def withdrawal_reached(withdrawal, user, files: list[str], *, subject: str, body: str):
    """A withdrawal reached files ``user`` downloaded: the exact list, in their inbox whatever their email."""
    study = withdrawal.study
    releases = [r for r in withdrawal.reach.get("releases", [])]
    if releases:
        number = ReleaseRequest.objects.filter(pk=releases[0]["id"]).values_list("number", flat=True).first()
        link = reverse("research-release", args=[study.code, number])
    else:
        link = reverse("research-datasets", args=[study.code])
    made = notify([user], Kind.WITHDRAWAL_REACHED, study=study, title=subject.removeprefix("[CERES] "), body=body,
                  link=link, key=f"withdrawal:{withdrawal.pk}")
    return made[0] if made else None


def withdrawal_messages(user, release) -> list:
    """The messages ``user`` was sent about the withdrawals that reached ``release`` (its superseded page says
    what was delivered and where)."""
    keys = [f"withdrawal:{pk}" for pk in Tombstone.objects.filter(release=release).values_list("withdrawal",
                                                                                               flat=True)]
    return list(Notification.objects.filter(recipient=user, key__in=keys).order_by("pk"))
