"""Telling people it is their turn: ``notify`` puts a message in each recipient's inbox, in the caller's
transaction, and queues its email once that commits (``notifications.deliver``, retried; never in the request).

The inbox always gets the message; the email goes only to a confirmed address (``deliverable_email``) and only
when the recipient has not switched that kind off. What happened to the email is recorded on the message, so a
page says what was delivered and where, never more.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from portal.accounts.services import confirmed_email, mask_email
from portal.core import queue
from portal.notifications.models import Email, EmailSwitch, Kind, Notification

log = logging.getLogger(__name__)

ERROR_MAX = 500


class NotificationError(ValueError):
    pass


def deliverable_email(user) -> str:
    """The address a message may be emailed to: the one the user confirmed on their account page (or a site
    administrator set), "" when there is none. The accounts app decides what is confirmed; this is the one place
    notifications ask."""
    return confirmed_email(user) or ""


def mask(address: str) -> str:
    """``ada@lab.example`` -> ``a…@lab.example``: enough for its owner to recognise, little for anyone else."""
    return mask_email(address)


def email_on(user, kind: str) -> bool:
    return not EmailSwitch.objects.filter(user=user, kind=kind).exists()


def switched_off(user) -> set[str]:
    return set(EmailSwitch.objects.filter(user=user).values_list("kind", flat=True))


def set_email_switches(user, enabled: Iterable[str]) -> None:
    """Email on for exactly the kinds in ``enabled``; every other kind reaches the inbox only."""
    enabled = set(enabled)
    unknown = sorted(enabled - set(Kind.values))
    if unknown:
        raise NotificationError(f"no such kind of message: {', '.join(unknown)}")
    with transaction.atomic():
        EmailSwitch.objects.filter(user=user, kind__in=enabled).delete()
        off = set(Kind.values) - enabled - switched_off(user)
        EmailSwitch.objects.bulk_create([EmailSwitch(user=user, kind=kind) for kind in sorted(off)])


def notify(recipients: Iterable, kind: str, *, study, title: str, body: str = "", link: str = "",
           key: str = "") -> list[Notification]:
    """One message per distinct active recipient (a recipient already told under ``key`` is not told again).
    Call it inside the transaction of the change it tells of: a rolled-back change tells nobody."""
    if kind not in Kind.values:
        raise NotificationError(f"no such kind of message: {kind!r}")
    made = []
    seen = set()
    for user in recipients:
        if user is None or user.pk in seen or not user.is_active:
            continue
        seen.add(user.pk)
        if key and Notification.objects.filter(recipient=user, key=key).exists():
            continue
        address = deliverable_email(user)
        state = (Email.NO_ADDRESS if not address else Email.PENDING if email_on(user, kind) else Email.SWITCHED_OFF)
        notification = Notification.objects.create(
            recipient=user, kind=kind, study=study, title=title[:200], body=body, link=link, key=key[:120],
            email=state, email_to=mask(address) if state == Email.PENDING else "")
        if state == Email.PENDING:
            queue.enqueue("notifications.deliver", notification.pk)
        made.append(notification)
    return made


def inbox(user) -> QuerySet[Notification]:
    return Notification.objects.filter(recipient=user).select_related("study").order_by("-created_at", "-pk")


def unread_count(user) -> int:
    return Notification.objects.filter(recipient=user, read_at__isnull=True).count()


def unread_per_user() -> Coalesce:
    """An expression over the rows of a query with a ``user`` column: that user's unread messages, counted in the
    same query (the navigation's grants carry it: the header's badge costs no query of its own)."""
    counted = (Notification.objects.filter(recipient=OuterRef("user"), read_at__isnull=True).order_by()
               .values("recipient").annotate(n=Count("*")).values("n"))
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def open_notification(user, pk: int) -> Notification | None:
    """The user's own message, marked read; None for anyone else's (or none)."""
    notification = Notification.objects.filter(recipient=user, pk=pk).first()
    if notification is not None and notification.read_at is None:
        notification.read_at = timezone.now()
        notification.save(update_fields=["read_at"])
    return notification


def mark_all_read(user) -> int:
    return Notification.objects.filter(recipient=user, read_at__isnull=True).update(read_at=timezone.now())


def absolute(link: str) -> str:
    return settings.CERES_PORTAL_URL + link if link.startswith("/") else link


def email_text(notification: Notification) -> tuple[str, str]:
    study = notification.study
    subject = f"[CERES] {notification.title}"
    lines = []
    if study is not None:
        lines += [f"Study {study.title} ({study.code})", ""]
    lines += [notification.title, ""]
    if notification.body:
        lines += [notification.body, ""]
    if notification.link:
        lines += [absolute(notification.link), ""]
    lines += [f"This message is also in your inbox: {absolute('/notifications/')}",
              f"Choose which messages reach you by email on your account page: {absolute('/accounts/')}"]
    return subject, "\n".join(lines) + "\n"


def deliver(notification_id: int, *, attempt: int = 1, last_attempt: bool = True) -> Notification | None:
    """Email one message (once). An error is raised for the task to retry; on the last attempt it is recorded
    as the delivery's failure instead. ``attempt`` (the task's, from 1) is recorded with the outcome."""
    with transaction.atomic():
        notification = (Notification.objects.select_for_update(of=("self",)).select_related("recipient", "study")
                        .filter(pk=notification_id).first())
        if notification is None or notification.email != Email.PENDING:
            return notification
        address = deliverable_email(notification.recipient)
        notification.email_attempts = attempt
        if not address:  # removed (or unconfirmed) since: the inbox has it
            notification.email, notification.email_to = Email.NO_ADDRESS, ""
            notification.save(update_fields=["email", "email_to", "email_attempts"])
            return notification
        subject, body = email_text(notification)
        try:
            send_mail(subject, body, None, [address], fail_silently=False)
        except Exception as exc:
            if not last_attempt:
                raise  # rolled back: still pending, the task tries again
            log.warning("notification %s: email to %s failed: %s", notification.pk, mask(address), exc)
            notification.email, notification.email_at = Email.FAILED, timezone.now()
            notification.email_error = str(exc)[:ERROR_MAX] or exc.__class__.__name__
            notification.save(update_fields=["email", "email_at", "email_error", "email_attempts"])
            return notification
        notification.email, notification.email_at, notification.email_to = Email.DELIVERED, timezone.now(), mask(
            address)
        notification.email_error = ""
        notification.save(update_fields=["email", "email_at", "email_to", "email_error", "email_attempts"])
    return notification


# --- who is told ------------------------------------------------------------------------------------------


def holders(study, *roles: str) -> list:
    """The active users holding one of ``roles`` in ``study`` under an unexpired grant."""
    from portal.access.models import RoleGrant

    now = timezone.now()
    grants = RoleGrant.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), study=study,
                                      role__in=roles)
    return list(get_user_model().objects.filter(pk__in=grants.values("user"), is_active=True).order_by("username"))


def others(users, actor) -> list:
    """``users`` but the one who acted (nobody is told of what they did themselves)."""
    actor_pk = getattr(actor, "pk", None)
    return [user for user in users if user.pk != actor_pk]
