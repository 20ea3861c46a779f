"""The events people are told of, each composed once: the domain services call these in the transaction of the
change (one line each), and the texts here say what the recipient may already see on the object's page and no
more: study, release, dataset or request, the decision and its reason; never a designator, headset or episode
content.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django_scopes import scopes_disabled

from portal.access.models import Role
from portal.notifications.models import Kind
from portal.notifications.services import holders, notify

REMINDER_DAYS = (14, 3)


def _others(users, actor) -> list:
    actor_pk = getattr(actor, "pk", None)
    return [user for user in users if user.pk != actor_pk]


# --- releases ----------------------------------------------------------------------------------------------


def release_moved(actor, release) -> None:
    """Called by ``releases.services.release_requests.set_state`` after every move of a release request."""
    from portal.releases.models import ReleaseRequest

    State = ReleaseRequest.State
    study = release.study
    name = f"{release.release_id} of study {study.code}"
    link = reverse("release-detail", args=[study.code, release.number])
    stewards = [release.requested_by, *holders(study, Role.COORDINATOR)]
    if release.state == State.AWAITING_APPROVAL:
        officers = [u for u in holders(study, Role.ETHICS_OFFICER) if u.pk != release.requested_by_id]
        notify(_others(officers, actor), Kind.RELEASE_AWAITS_APPROVAL, study=study,
               title=f"{name} awaits your approval",
               body=f"{release.episode_count} episode(s), {release.approvals_required or 1} approval(s) needed. "
                    f"Review it in the episode viewer and approve or reject it.", link=link)
    elif release.state == State.APPROVED:
        notify(_others(stewards, actor), Kind.RELEASE_APPROVED, study=study, title=f"{name} was approved",
               body="It is being published; you are told again when it is.", link=link)
    elif release.state == State.REJECTED:
        notify(_others(stewards, actor), Kind.RELEASE_REJECTED, study=study, title=f"{name} was rejected",
               body=f"Reason: {release.reason}", link=link)
    elif release.state == State.RELEASED:
        notify(_others(stewards, actor), Kind.RELEASE_PUBLISHED, study=study, title=f"{name} was published",
               body="Researchers with access to the study can now download it.", link=link)
    elif release.state == State.FAILED:
        notify(_others(stewards, actor), Kind.RELEASE_FAILED, study=study, title=f"{name} failed",
               body=f"Reason: {release.reason}\nIts page lets a coordinator try again.", link=link)


# --- access ------------------------------------------------------------------------------------------------


def access_requested(access) -> None:
    study = access.study
    notify(_others(holders(study, Role.ETHICS_OFFICER), access.researcher), Kind.ACCESS_AWAITS_DECISION,
           study=study, title=f"{access.researcher.get_username()} asks for access to study {study.code}",
           body="Grant it until a date, or refuse it with a reason.",
           link=reverse("research-access-requests", args=[study.code]))


def access_decided(access) -> None:
    """Granted, refused or revoked: the researcher is told."""
    from portal.research.models import AccessRequest

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
    from portal.research.models import AccessRequest

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


# --- datasets ----------------------------------------------------------------------------------------------


def dataset_moved(dataset) -> None:
    """Ready or failed: everyone who asked for it is told (identical selections share one dataset)."""
    from portal.research.models import Dataset, DatasetRequester

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


# --- a withdrawal ------------------------------------------------------------------------------------------


def withdrawal_reached(withdrawal, user, files: list[str], *, subject: str, body: str):
    """A withdrawal reached files ``user`` downloaded: the exact list, in their inbox whatever their email."""
    study = withdrawal.study
    releases = [r for r in withdrawal.reach.get("releases", [])]
    if releases:
        from portal.releases.models import ReleaseRequest

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
    from portal.notifications.models import Notification
    from portal.research.models import Tombstone

    keys = [f"withdrawal:{pk}" for pk in Tombstone.objects.filter(release=release).values_list("withdrawal",
                                                                                               flat=True)]
    return list(Notification.objects.filter(recipient=user, key__in=keys).order_by("pk"))


def withdrawal_told(withdrawal) -> list[tuple]:
    """For the stewards' page of a withdrawal: each notice with what became of it, as (notice, what). Says where
    it went (inbox, email delivered or not), never the message's text or the address."""
    from portal.notifications.models import Email, Notification

    messages = {n.recipient_id: n for n in Notification.objects.filter(key=f"withdrawal:{withdrawal.pk}")}
    told = []
    for notice in withdrawal.notices.select_related("user"):
        message = messages.get(notice.user_id)
        if notice.sent_at is None or message is None:
            what = "not told yet"
        elif message.email == Email.DELIVERED:
            what = f"in their inbox; email delivered {message.email_at:%Y-%m-%d %H:%M} UTC"
        elif message.email == Email.PENDING:
            what = "in their inbox; email not delivered yet"
        elif message.email == Email.FAILED:
            what = "in their inbox; the email failed: tell them another way if they do not sign in"
        else:
            what = f"in their inbox only ({message.get_email_display().lower()})"
        told.append((notice, what))
    return told
