"""Each person is told when it is their turn: in their own inbox always, by email to a confirmed address unless
they switched that kind off, sent by a task after the change commits; the pages say what was delivered and where.
Expected recipients are the people the governance rules name, listed here by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from portal.notifications import events
from portal.notifications.models import Email, Kind, Notification
from portal.notifications.services import deliver, notify
from portal.releases.models import ReleaseRequest
from portal.releases.services import publish, release_requests
from portal.releases.services.approval import approve
from portal.research.services import access

pytestmark = pytest.mark.django_db


def told(user, kind=None) -> list[Notification]:
    found = Notification.objects.filter(recipient=user).order_by("pk")
    return list(found.filter(kind=kind) if kind else found)


def with_email(user, address):
    user.email = address
    user.save(update_fields=["email"])
    return user


def test_a_release_tells_the_officers_then_the_requester_and_coordinators(
        reg, team, verified, make_request, deliver_queued, django_capture_on_commit_callbacks):
    with_email(reg.ethics, "ethics@lab.example")
    with_email(reg.coordinator, "coord@lab.example")
    episodes = verified(1)
    with django_capture_on_commit_callbacks(execute=True):
        request = make_request(episodes)
    name = f"{request.release_id} of study {reg.study.code}"
    link = reverse("release-detail", args=[reg.study.code, request.number])
    # Every ethics officer but the requester (reg.coordinator asked): reg.ethics, ethics2 and "both".
    awaiting = Notification.objects.filter(kind=Kind.RELEASE_AWAITS_APPROVAL)
    assert sorted(n.recipient.username for n in awaiting) == sorted(
        u.username for u in (reg.ethics, team.ethics2, team.both))
    assert {n.title for n in awaiting} == {f"{name} awaits your approval"} and {n.link for n in awaiting} == {link}
    assert told(reg.coordinator) == []
    officer = told(reg.ethics)[0]
    assert (officer.email, officer.email_to) == (Email.PENDING, "e…@lab.example")
    assert told(team.ethics2)[0].email == Email.NO_ADDRESS

    assert deliver_queued() == 1  # only reg.ethics has an address
    assert [m.to for m in mail.outbox] == [["ethics@lab.example"]]
    message = mail.outbox[0]
    assert message.subject == f"[CERES] {name} awaits your approval"
    assert reg.study.code in message.body and f"http://127.0.0.1:8000{link}" in message.body
    assert reg.demonstrator.designator not in message.body and reg.headset.headset_id not in message.body
    officer.refresh_from_db()
    assert officer.email == Email.DELIVERED and officer.delivery.startswith("in your inbox; email to e…@lab.example "
                                                                            "delivered at ")

    with scope(study=reg.study), django_capture_on_commit_callbacks(execute=True):
        for person in (reg.ethics, team.ethics2):
            approve(person, request, manifest_sha256=request.manifest_sha256)
        publish.publish_release(request.pk)
    # The requester and the study's coordinators (reg.coordinator is both; "both" is a coordinator too).
    for kind in (Kind.RELEASE_APPROVED, Kind.RELEASE_PUBLISHED):
        assert sorted(n.recipient.username for n in Notification.objects.filter(kind=kind)) == sorted(
            [reg.coordinator.username, team.both.username]), kind
    assert [n.title for n in told(reg.coordinator)] == [f"{name} was approved", f"{name} was published"]
    deliver_queued()
    assert [m.subject for m in mail.outbox[1:]] == [f"[CERES] {name} was approved", f"[CERES] {name} was published"]
    assert told(reg.ethics, Kind.RELEASE_PUBLISHED) == []

    second = make_request(verified(1))
    with scope(study=reg.study), django_capture_on_commit_callbacks(execute=True):
        release_requests.reject(team.ethics2, second, reason="the purpose does not match the agreement")
    rejected = told(reg.coordinator, Kind.RELEASE_REJECTED)
    assert len(rejected) == 1 and rejected[0].body == "Reason: the purpose does not match the agreement"
    assert told(team.ethics2, Kind.RELEASE_REJECTED) == []  # who decided is not told of their own decision


def test_access_tells_the_officers_of_a_request_and_the_researcher_of_each_decision(
        reg, team, agreement, make_user, django_capture_on_commit_callbacks):
    researcher = make_user(f"{reg.study.code}-res")
    asked = access.request_access(researcher, reg.study, purpose="a grasping policy", version=agreement.version,
                                  sha256=agreement.sha256)
    assert sorted(n.recipient.username for n in Notification.objects.filter(kind=Kind.ACCESS_AWAITS_DECISION)) == \
        sorted(u.username for u in (reg.ethics, team.ethics2, team.both))
    until = timezone.now() + timedelta(days=20)
    access.grant_access(reg.ethics, asked, expires_at=until)
    granted = told(researcher, Kind.ACCESS_GRANTED)
    assert len(granted) == 1 and granted[0].title == f"Your access to study {reg.study.code} was granted"
    assert f"{until:%Y-%m-%d %H:%M} UTC" in granted[0].body
    access.revoke_access(reg.ethics, asked, reason="the project ended")
    assert [n.body for n in told(researcher, Kind.ACCESS_REVOKED)] == ["Reason: the project ended"]
    again = access.request_access(researcher, reg.study, purpose="again", version=agreement.version,
                                  sha256=agreement.sha256)
    access.refuse_access(team.ethics2, again, reason="no purpose given")
    assert [n.body for n in told(researcher, Kind.ACCESS_REFUSED)] == ["Reason: no purpose given"]
    assert not Notification.objects.exclude(recipient=researcher).filter(kind__in=(
        Kind.ACCESS_GRANTED, Kind.ACCESS_REFUSED, Kind.ACCESS_REVOKED)).exists()


def test_access_ending_is_told_14_and_3_days_before_and_once_ended_each_once(reg, agreement, make_user):
    researcher = make_user(f"{reg.study.code}-res")
    asked = access.request_access(researcher, reg.study, purpose="a policy", version=agreement.version,
                                  sha256=agreement.sha256)
    ends = timezone.now() + timedelta(days=30)
    access.grant_access(reg.ethics, asked, expires_at=ends)
    assert events.access_reminders(now=ends - timedelta(days=20)) == 0  # more than 14 days left
    for days_left, kind, title in ((13, Kind.ACCESS_EXPIRING, "ends in 14 days or less"),
                                   (2, Kind.ACCESS_EXPIRING, "ends in 3 days or less"),
                                   (-1, Kind.ACCESS_EXPIRED, "expired")):
        now = ends - timedelta(days=days_left)
        assert events.access_reminders(now=now) == 1, days_left
        assert events.access_reminders(now=now + timedelta(hours=1)) == 0, days_left  # once
        assert told(researcher)[-1].kind == kind and told(researcher)[-1].title.endswith(title)
    assert [n.key for n in told(researcher, Kind.ACCESS_EXPIRING)] == [f"access-expiring-14:{asked.pk}",
                                                                       f"access-expiring-3:{asked.pk}"]


def test_the_inbox_is_its_owners_alone_newest_first_with_a_badge_and_marked_read_when_opened(
        reg, make_user, client, django_capture_on_commit_callbacks):
    owner, other = make_user("owner"), make_user("other")
    first = notify([owner], Kind.INTEGRITY_ALERT, study=reg.study, title="first message", link="/research/")
    second = notify([owner], Kind.DATASET_READY, study=reg.study, title="second message",
                    link=reverse("research-datasets", args=[reg.study.code]))
    notify([other], Kind.DATASET_READY, study=reg.study, title="not yours")
    client.force_login(owner)
    page = client.get(reverse("notifications")).content.decode()
    assert page.index("second message") < page.index("first message") and "not yours" not in page
    assert 'aria-label="2 unread"' in page
    assert "no email address: shown in your inbox" in page
    opened = client.get(reverse("notification-open", args=[second[0].pk]))
    assert opened.status_code == 302 and opened["Location"] == second[0].link
    assert 'aria-label="1 unread"' in client.get(reverse("notifications")).content.decode()
    assert client.get(reverse("notification-open", args=[Notification.objects.get(title="not yours").pk])
                      ).status_code == 404
    Notification.objects.filter(pk=first[0].pk).update(link="https://elsewhere.example/")
    assert client.get(reverse("notification-open", args=[first[0].pk]))["Location"] == \
        f"{reverse('notifications')}#n{first[0].pk}"  # never sent off-site
    assert "unread" not in client.get(reverse("notifications")).content.decode().split("<main>")[0]


def test_email_is_switched_per_kind_on_the_account_page_and_the_inbox_still_gets_it(
        reg, make_user, client, deliver_queued, django_capture_on_commit_callbacks):
    user = with_email(make_user("switcher"), "switcher@lab.example")
    client.force_login(user)
    account = client.get(reverse("account")).content.decode()
    assert 'id="email-switches"' in account and "s…@lab.example" in account
    kept = [kind for kind in Kind.values if kind != Kind.DATASET_READY]
    response = client.post(reverse("notification-email-switches"), {"email": kept})
    assert response.status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        off = notify([user], Kind.DATASET_READY, study=reg.study, title="dataset-0001 is ready")[0]
        on = notify([user], Kind.DATASET_FAILED, study=reg.study, title="dataset-0002 failed")[0]
    assert (off.email, on.email) == (Email.SWITCHED_OFF, Email.PENDING)
    deliver_queued()
    assert [m.subject for m in mail.outbox] == ["[CERES] dataset-0002 failed"]
    inbox = client.get(reverse("notifications")).content.decode()
    assert "email switched off for this kind: shown in your inbox" in inbox

    response = client.post(reverse("notification-email-switches"), {"email": ["carrier_pigeon"]}, follow=True)
    assert "no such kind of message: carrier_pigeon" in response.content.decode()
    on_page = client.get(reverse("account")).content.decode()
    assert f'value="{Kind.DATASET_FAILED}" checked' in on_page  # nothing changed by the refused post
    assert f'value="{Kind.DATASET_READY}" checked' not in on_page


def test_an_email_that_cannot_be_delivered_is_retried_then_recorded_as_failed(reg, make_user, settings, client,
                                                                              django_capture_on_commit_callbacks):
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: a real connection refused
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS, settings.EMAIL_TIMEOUT = (
        "127.0.0.1", port, False, 5)
    user = with_email(make_user("unlucky"), "unlucky@lab.example")
    message = notify([user], Kind.ACCESS_GRANTED, study=reg.study, title="granted")[0]
    with pytest.raises(OSError):
        deliver(message.pk, last_attempt=False)
    message.refresh_from_db()
    assert message.email == Email.PENDING and message.email_at is None  # still to be sent: the task retries
    deliver(message.pk, last_attempt=True)
    message.refresh_from_db()
    assert message.email == Email.FAILED and message.email_error
    client.force_login(user)
    assert "in your inbox; email to u…@lab.example failed: " in client.get(reverse("notifications")).content.decode()


def test_a_rolled_back_change_tells_nobody(reg, team, verified, make_request, sent_tasks,
                                          django_capture_on_commit_callbacks):
    with_email(reg.ethics, "ethics@lab.example")
    request = make_request(verified(1), submit=False)
    before = Notification.objects.count()
    with scope(study=reg.study), django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        from django.db import transaction

        with transaction.atomic():
            release_requests.submit(reg.coordinator, request)
            raise RuntimeError("the request fails after the move")
    assert Notification.objects.count() == before
    assert not [name for name, _ in sent_tasks if name == "notifications.deliver"]
    with scope(study=reg.study):
        assert ReleaseRequest.objects.get(pk=request.pk).state == ReleaseRequest.State.DRAFT


def test_who_asked_for_a_dataset_is_told_it_is_ready_or_failed(reg, verified, make_released, make_researcher):
    from portal.research.models import Dataset
    from portal.research.services import catalogue, datasets

    release = make_released(verified(2))
    asker, same, other = make_researcher("asker"), make_researcher("same"), make_researcher("other")
    with scope(study=reg.study):
        chosen = list(catalogue.released_items().filter(request=release).order_by("episode_index"))
        made, _ = datasets.request_dataset(asker, reg.study, chosen)
        shared, reused = datasets.request_dataset(same, reg.study, chosen)  # the same selection: one dataset
        assert reused and shared.pk == made.pk
        datasets.build_dataset(made.pk)
        made = Dataset.objects.get(pk=made.pk)
        broken, _ = datasets.request_dataset(asker, reg.study, chosen[:1])
        datasets.fail_dataset(broken, "build failed: a shard does not match its release's digests")
        broken = Dataset.objects.get(pk=broken.pk)
    assert made.state == Dataset.State.READY
    ready, failed = told(asker, Kind.DATASET_READY), told(asker, Kind.DATASET_FAILED)
    assert [n.title for n in ready] == [f"{made.dataset_id} of study {reg.study.code} is ready"]
    assert ready[0].link == reverse("research-dataset", args=[reg.study.code, made.number])
    assert [n.body for n in failed] == ["build failed: a shard does not match its release's digests"]
    assert [n.title for n in told(same, Kind.DATASET_READY)] == [ready[0].title]  # who asked the same: told too
    assert not Notification.objects.filter(recipient=other, kind__in=(Kind.DATASET_READY, Kind.DATASET_FAILED))


def test_the_email_task_retries_and_records_the_failure_on_its_last_attempt(reg, make_user, settings):
    """The Celery task itself (run in this process, its retries too): every attempt meets a refused connection;
    the message is not marked failed before the last."""
    import socket

    from portal.notifications import tasks

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS, settings.EMAIL_TIMEOUT = (
        "127.0.0.1", port, False, 5)
    user = with_email(make_user("retried"), "retried@lab.example")
    message = notify([user], Kind.ACCESS_REVOKED, study=reg.study, title="revoked")[0]
    tasks.deliver.apply((message.pk,))
    message.refresh_from_db()
    assert message.email == Email.FAILED and message.email_error
    assert message.email_attempts == tasks.MAX_RETRIES + 1  # the first try and every retry
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    again = notify([user], Kind.ACCESS_REVOKED, study=reg.study, title="revoked again")[0]
    tasks.deliver.apply((again.pk,))
    again.refresh_from_db()
    assert again.email == Email.DELIVERED and [m.subject for m in mail.outbox] == ["[CERES] revoked again"]
