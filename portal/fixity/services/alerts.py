"""Alerts: raised for a study (a shard that failed its receipt verification, the problems a fixity run found),
emailed to the study's coordinators and ethics officers, shown as a banner on their dashboard and the study's
pages until one of them acknowledges it with a note, and resolved with a note. Every step is an audit event."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import get_connection, send_mass_mail
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from portal.access.models import Role, RoleGrant
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.core import queue
from portal.core.states import lock_fresh, transition
from portal.fixity.exceptions import AlertError, AlertRefused
from portal.fixity.models import Alert, FixityProblem, FixityRun
from portal.studies.models import Study

log = logging.getLogger(__name__)
State = Alert.State
NOTE_MAX_CHARS = 2000
# Problems an alert's email names one by one; the alert's page lists them all.
EMAIL_PROBLEMS = 20
STEWARDS = (Role.COORDINATOR, Role.ETHICS_OFFICER)


def _snapshot(alert: Alert) -> dict:
    return {"state": alert.state, "kind": alert.kind, "acknowledged_note": alert.acknowledged_note,
            "resolved_note": alert.resolved_note}


def raise_alert(study: Study, *, kind: str, message: str, episode=None, run: FixityRun | None = None,
                email: bool = True) -> Alert:
    """Open an alert for ``study``'s coordinators and ethics officers (audited, in the caller's transaction) and
    email it once the transaction commits, unless ``email`` is false."""
    with transaction.atomic():
        alert = Alert.objects.create(study=study, kind=kind, message=message, episode=episode, run=run)
        record(None, "alert.raised", alert, after={**_snapshot(alert), "message": message,
                                                   "episode": episode.folder if episode is not None else None,
                                                   "run": run.pk if run is not None else None})
        if email:
            queue.enqueue("fixity.email_alert", alert.pk)
    return alert


def receipt_mismatch(episode, problems: list[str]) -> Alert:
    """A stored shard no longer matches its receipt. Not emailed again while an earlier alert about the same
    shard is unresolved: the daily re-verification raises one alert a day until someone resolves it."""
    repeat = Alert.objects.filter(episode=episode, state__in=Alert.UNRESOLVED).exists()
    return raise_alert(episode.study, kind=Alert.Kind.RECEIPT_MISMATCH, episode=episode, email=not repeat,
                       message=f"{episode.prefix}: shard does not match its receipt: " + "; ".join(problems[:5]))


def fixity_alert(study: Study, run: FixityRun, problems: list[FixityProblem]) -> Alert | None:
    """The study's problems of one fixity run (not yet saved): each is tied to the unresolved alert that already
    reports the same object and kind, if any; the others get one new alert, emailed. None when all are repeats."""
    unresolved = Alert.objects.filter(study=study, kind=Alert.Kind.FIXITY, state__in=Alert.UNRESOLVED)
    names = sorted({problem.object_name for problem in problems})
    reported: dict[tuple[str, str, str], int] = {}
    for start in range(0, len(names), 500):
        for storage, name, kind, alert_id in FixityProblem.objects.filter(
                alert__in=unresolved, object_name__in=names[start:start + 500]).values_list(
                "storage", "object_name", "kind", "alert_id"):
            reported.setdefault((storage, name, kind), alert_id)
    new = []
    for problem in problems:
        problem.alert_id = reported.get((problem.storage, problem.object_name, problem.kind))
        if problem.alert_id is None:
            new.append(problem)
    if not new:
        return None
    alert = raise_alert(study, kind=Alert.Kind.FIXITY, run=run, message=_summary(study, run, new))
    for problem in new:
        problem.alert = alert
    return alert


def _summary(study: Study, run: FixityRun, problems: list[FixityProblem]) -> str:
    counts = {}
    for problem in problems:
        counts[problem.kind] = counts.get(problem.kind, 0) + 1
    parts = [f"{counts[kind]} {label.lower()}" for kind, label in FixityProblem.Kind.choices if kind in counts]
    first = problems[0]
    more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
    return (f"fixity run {run.pk} found {', '.join(parts)} in study {study.code}: {first.kind} "
            f"{first.storage}:{first.object_name} ({first.detail}){more}")


def _note(note: str, what: str) -> str:
    note = (note or "").strip()
    if not note:
        raise AlertError(f"write a note to {what} the alert: what you found, or what you do about it")
    if len(note) > NOTE_MAX_CHARS:
        raise AlertError(f"the note is longer than {NOTE_MAX_CHARS} characters")
    return note


def _require_steward(actor, alert: Alert, what: str) -> None:
    if not has_role(actor, alert.study, *STEWARDS):
        raise AlertRefused(f"only a coordinator or ethics officer of study {alert.study.code} can {what} its alerts")


@transaction.atomic
def acknowledge(actor, alert: Alert, *, note: str) -> Alert:
    """Say the alert is seen and looked into: it leaves the banner, stays unresolved."""
    _require_steward(actor, alert, "acknowledge")
    note = _note(note, "acknowledge")
    lock_fresh(alert)
    transition(actor, alert, State.ACKNOWLEDGED, action="alert.acknowledged", snapshot=_snapshot,
               acknowledged_at=timezone.now(), acknowledged_by=actor, acknowledged_note=note)
    return alert


@transaction.atomic
def resolve(actor, alert: Alert, *, note: str) -> Alert:
    """Close the alert, saying what was done (restored from a copy, the orphan removed, a false alarm and why)."""
    _require_steward(actor, alert, "resolve")
    note = _note(note, "resolve")
    lock_fresh(alert)
    transition(actor, alert, State.RESOLVED, action="alert.resolved", snapshot=_snapshot,
               resolved_at=timezone.now(), resolved_by=actor, resolved_note=note)
    return alert


# --- who is told, and how ------------------------------------------------------------------------------------


def recipients(study: Study) -> list:
    """The study's coordinators and ethics officers (active, unexpired grants) who have an email address."""
    now = timezone.now()
    grants = RoleGrant.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), study=study,
                                      role__in=STEWARDS)
    return list(get_user_model().objects.filter(pk__in=grants.values("user"), is_active=True).exclude(email="")
                .order_by("username"))


def alert_url(alert: Alert) -> str:
    return settings.CERES_PORTAL_URL + reverse("alert-detail", args=[alert.study.code, alert.pk])


def _email_text(alert: Alert) -> tuple[str, str]:
    study = alert.study
    subject = f"[CERES] {alert.get_kind_display()} in study {study.code}"
    lines = [f"An integrity alert was raised in study {study.title} ({study.code}) on "
             f"{alert.created_at:%Y-%m-%d %H:%M} UTC.", "", alert.message, ""]
    problems = list(alert.problems.order_by("pk")[:EMAIL_PROBLEMS + 1])
    if problems:
        lines.append("Problems:")
        lines += [f"- {p.get_kind_display()}: {p.storage}:{p.object_name}: {p.detail}"
                  for p in problems[:EMAIL_PROBLEMS]]
        if len(problems) > EMAIL_PROBLEMS:
            lines.append("- and more: the alert's page lists them all.")
        lines.append("")
    lines += ["Acknowledge it (with a note) once you look into it, and resolve it (with a note) when it is dealt "
              "with:", alert_url(alert), "",
              "You receive this as a coordinator or ethics officer of the study."]
    return subject, "\n".join(lines)


def email_alert(alert: Alert) -> int:
    """Email the alert to the study's coordinators and ethics officers, one message each; returns how many. Sent
    once: a repeated delivery of the task finds it emailed and sends nothing."""
    with transaction.atomic():
        lock_fresh(alert)  # two deliveries of the task at once send it once
        if alert.emailed_at is not None:
            return 0
        people = recipients(alert.study)
        subject, body = _email_text(alert)
        if people:  # an error (the mail server down) rolls back: the task is retried and sends it then
            send_mass_mail([(subject, body, settings.DEFAULT_FROM_EMAIL, [person.email]) for person in people],
                           fail_silently=False, connection=get_connection())
        alert.emailed_at, alert.emailed_to = timezone.now(), len(people)
        alert.save(update_fields=["emailed_at", "emailed_to"])
        record(None, "alert.emailed", alert, after={"to": [person.get_username() for person in people]})
    if not people:
        log.warning("alert %s of study %s: no coordinator or ethics officer has an email address", alert.pk,
                    alert.study.code)
    return len(people)


# --- the banner ---------------------------------------------------------------------------------------------


def open_alerts_per_study() -> Coalesce:
    """An expression over the rows of a query with a ``study`` column: that study's open (unacknowledged)
    alerts, counted in the same query (the navigation's grants carry it, so the banner costs no query)."""
    counted = (Alert.objects.with_scopes_disabled().filter(study=OuterRef("study"), state=State.OPEN).order_by()
               .values("study").annotate(n=Count("*")).values("n"))
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def banner(nav: dict, request) -> list[tuple[Study, int]]:
    """The studies whose open alerts the page shows on top: on the dashboard every study the user coordinates or
    reviews, on a study's page that study; nothing elsewhere. ``nav``: ``roles_by_study`` with
    ``open_alerts=open_alerts_per_study()``."""
    match = getattr(request, "resolver_match", None)
    current = getattr(request, "study", None)
    on_dashboard = match is not None and match.url_name == "dashboard"
    if not on_dashboard and current is None:
        return []
    return [(study, study.open_alerts) for study, roles in nav.items()
            if getattr(study, "open_alerts", 0) and set(roles) & set(STEWARDS)
            and (on_dashboard or study.pk == current.pk)]
