"""Alerts are acknowledged and resolved with a note, each an audit event, only by the study's coordinators and ethics
officers (pages, API and services alike); an acknowledged alert leaves the banner; a shard that fails its receipt
verification raises an alert that is emailed once while it stays unresolved."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.core import mail
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.urls import reverse
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.fixity import tasks
from portal.fixity.exceptions import AlertError, AlertRefused, IllegalTransition
from portal.fixity.models import Alert
from portal.fixity.services import alerts
from portal.recordings.services.verification import verify_episode

pytestmark = pytest.mark.django_db
State = Alert.State


@pytest.fixture
def alert(reg, team):
    with scope(study=reg.study):
        return alerts.raise_alert(reg.study, kind=Alert.Kind.RECEIPT_MISMATCH, message=f"{reg.study.code}/x: changed")


def events(alert: Alert) -> list[tuple[str, str, dict]]:
    return [(event.action, event.actor_label, event.after) for event in
            AuditEvent.objects.filter(target_type="fixity.alert", target_id=str(alert.pk)).order_by("seq")]


def test_acknowledging_and_resolving_need_a_note_and_are_audited(reg, team, alert):
    officer, coordinator = reg.ethics, reg.coordinator
    with scope(study=reg.study):
        for blank in ("", "   "):
            with pytest.raises(AlertError, match="write a note to acknowledge"):
                alerts.acknowledge(officer, alert, note=blank)
        with pytest.raises(AlertError, match="longer than 2000"):
            alerts.acknowledge(officer, alert, note="x" * 2001)
        alert.refresh_from_db()
        assert alert.state == State.OPEN
        alerts.acknowledge(officer, alert, note="  looking at the gateway's logs ")
        with pytest.raises(AlertError, match="write a note to resolve"):
            alerts.resolve(coordinator, alert, note="")
        alerts.resolve(coordinator, alert, note="restored the object from the backup")
        alert.refresh_from_db()
    assert (alert.state, alert.acknowledged_by, alert.acknowledged_note, alert.resolved_by, alert.resolved_note) == (
        State.RESOLVED, officer, "looking at the gateway's logs", coordinator, "restored the object from the backup")
    assert [(action, actor) for action, actor, _ in events(alert)] == [
        ("alert.raised", "system"), ("alert.acknowledged", officer.username), ("alert.resolved", coordinator.username)]
    assert events(alert)[1][2]["acknowledged_note"] == "looking at the gateway's logs"
    assert events(alert)[2][2] == {"state": "resolved", "kind": "receipt_mismatch", "acknowledged_note":
                                   "looking at the gateway's logs",
                                   "resolved_note": "restored the object from the backup"}
    with scope(study=reg.study), pytest.raises(IllegalTransition, match="resolved; it cannot become acknowledged"):
        alerts.acknowledge(officer, alert, note="again")


def test_an_open_alert_may_be_resolved_at_once(reg, alert):
    with scope(study=reg.study):
        alerts.resolve(reg.ethics, alert, note="a false alarm: the object was replaced by the release job")
        alert.refresh_from_db()
    assert alert.state == State.RESOLVED and alert.acknowledged_at is None


def test_only_the_studys_coordinators_and_ethics_officers_act_on_its_alerts(reg, team, alert, make_user, make_registry):
    researcher = make_user(f"{reg.study.code}-researcher", reg.study, ["researcher"])
    other = make_registry(code=f"{reg.study.code}-b")
    refusal = f"only a coordinator or ethics officer of study {reg.study.code}"
    with scope(study=reg.study):
        for user in (researcher, other.coordinator, other.ethics):
            for act in (alerts.acknowledge, alerts.resolve):
                with pytest.raises(AlertRefused, match=refusal):
                    act(user, alert, note="mine now")
        alert.refresh_from_db()
    assert alert.state == State.OPEN and [action for action, _, _ in events(alert)] == ["alert.raised"]


def test_the_pages_acknowledge_and_resolve_with_a_note(client, reg, alert):
    client.force_login(reg.ethics)
    detail = reverse("alert-detail", args=[reg.study.code, alert.pk])
    assert f'data-study="{reg.study.code}" data-open-alerts="1"' in client.get(detail).content.decode()
    response = client.post(reverse("alert-acknowledge", args=[reg.study.code, alert.pk]), {"note": ""})
    assert response.status_code == 302 and response["Location"] == detail
    assert "write a note" in " ".join(str(m) for m in get_messages(response.wsgi_request))
    alert.refresh_from_db()
    assert alert.state == State.OPEN
    client.post(reverse("alert-acknowledge", args=[reg.study.code, alert.pk]), {"note": "on it"})
    alert.refresh_from_db()
    assert alert.state == State.ACKNOWLEDGED
    page = client.get(reverse("dashboard")).content.decode()
    assert 'class="alert-banner"' not in page  # acknowledged: the banner is gone
    listed = client.get(reverse("alert-list", args=[reg.study.code])).content.decode()
    assert f'data-alert="{alert.pk}" data-state="acknowledged"' in listed  # still listed: not resolved
    client.post(reverse("alert-resolve", args=[reg.study.code, alert.pk]), {"note": "fixed"})
    alert.refresh_from_db()
    assert alert.state == State.RESOLVED
    assert f'data-alert="{alert.pk}"' not in client.get(reverse("alert-list", args=[reg.study.code])).content.decode()
    resolved = client.get(reverse("alert-list", args=[reg.study.code]) + "?state=resolved").content.decode()
    assert f'data-alert="{alert.pk}" data-state="resolved"' in resolved
    assert 'id="resolve"' not in client.get(detail).content.decode()  # nothing left to do


def test_the_api_acknowledges_and_resolves_with_a_note(client, reg, alert):
    client.force_login(reg.coordinator)
    base = f"/api/studies/{reg.study.code}/alerts/"
    listed = client.get(base + "?state=open").json()
    assert [row["id"] for row in listed["results"]] == [alert.pk]
    refused = client.post(f"{base}{alert.pk}/acknowledge/", {}, content_type="application/json")
    assert refused.status_code == 400 and "note" in refused.json()
    done = client.post(f"{base}{alert.pk}/acknowledge/", {"note": "on it"}, content_type="application/json")
    assert done.status_code == 200 and done.json()["state"] == "acknowledged"
    assert done.json()["acknowledged_by"] == reg.coordinator.username
    assert client.get(base + "?state=open").json()["results"] == []
    assert client.get(base + "?state=sideways").status_code == 400
    resolved = client.post(f"{base}{alert.pk}/resolve/", {"note": "done"}, content_type="application/json")
    assert resolved.json()["state"] == "resolved"
    again = client.post(f"{base}{alert.pk}/resolve/", {"note": "done"}, content_type="application/json")
    assert again.status_code == 409


def test_a_shard_failing_its_receipt_is_alerted_and_emailed_once_while_unresolved(reg, verified, sent_tasks,
                                                                                django_capture_on_commit_callbacks):
    reg.ethics.email = "ethics@example.org"
    reg.ethics.save(update_fields=["email"])
    (episode,) = verified(1)
    name = episode.prefix + "meta/info.json"
    storages["shards"].delete(name)
    storages["shards"].save(name, ContentFile(b"{}"))
    with scope(study=reg.study), django_capture_on_commit_callbacks(execute=True):
        verify_episode(episode)
        verify_episode(episode)  # the daily re-verification, before anyone resolved the first alert
        first, second = Alert.objects.filter(episode=episode).order_by("pk")
    assert (first.kind, first.state) == (Alert.Kind.RECEIPT_MISMATCH, State.OPEN) and "meta/info.json" in first.message
    queued = [args for task, args in sent_tasks if task == "fixity.email_alert"]
    assert queued == [(first.pk,)]
    tasks.email_alert(first.pk)
    tasks.email_alert(first.pk)  # delivered twice: sent once
    assert [message.to for message in mail.outbox] == [["ethics@example.org"]]
    assert episode.prefix in mail.outbox[0].body
    assert second.emailed_at is None
