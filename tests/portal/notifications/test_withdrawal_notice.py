"""After a withdrawal each researcher in its reach is told, with the exact files to delete, in their inbox whether
or not they have an email address; the pages say what was delivered and where, never that a list was sent when it
was not."""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta

import pytest
from django.core import mail
from django_scopes import scope

from portal.notifications.models import Email, Kind, Notification
from portal.releases.models import ReleaseRequest
from portal.research.models import Withdrawal, WithdrawalNotice
from portal.research.services import links, withdrawals
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.consent import give_consent
from portal.studies.services.demonstrators import create_demonstrator

pytestmark = pytest.mark.django_db


@pytest.fixture
def second(reg):
    with scope(study=reg.study):
        other = create_demonstrator(reg.coordinator, reg.study, headset=reg.headset)
        give_consent(reg.coordinator, other, document=reg.document, consent_date=date.today() - timedelta(days=30),
                     scopes=["episode_release"])
    return dataclasses.replace(reg, demonstrator=other)


def test_every_researcher_in_the_reach_is_told_in_the_inbox_and_the_pages_say_where_it_went(
        reg, second, verified_factory, make_released, make_researcher, client, deliver_queued,
        django_capture_on_commit_callbacks):
    # A study that asks for fresh approval of a superseding release: its officers must be told it waits for them.
    reg.study.carry_over_approvals = False
    reg.study.save(update_fields=["carry_over_approvals"])
    release = make_released([verified_factory(reg), verified_factory(second)])
    mailed, silent, untouched = (make_researcher(name) for name in ("mailed", "silent", "untouched"))
    mailed.email = "mailed@lab.example"
    mailed.save(update_fields=["email"])
    with scope(study=reg.study):
        for user in (mailed, silent):
            links.release_links(user, release, ["episode-000000/meta/info.json",
                                                "episode-000000/meta/episodes/chunk-000/file-000.parquet"], via="api")
        links.release_links(untouched, release, ["episode-000001/meta/info.json"], via="api")
        with django_capture_on_commit_callbacks(execute=True):
            event = withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(),
                                     reason="asked by the participant")
        withdrawal = Withdrawal.objects.get(event=event)
        with django_capture_on_commit_callbacks(execute=True):
            withdrawals.apply_withdrawal(withdrawal.pk)
        successor = ReleaseRequest.objects.get(supersedes=release)
    expected = [f"{release.release_id}/episode-000000/meta/info.json",
                f"{release.release_id}/episode-000000/meta/episodes/chunk-000/file-000.parquet"]
    reached = Notification.objects.filter(kind=Kind.WITHDRAWAL_REACHED).order_by("recipient__username")
    assert [n.recipient for n in reached] == [mailed, silent]
    for message in reached:
        listed = [line.strip() for line in message.body.splitlines() if line.startswith("  ")]
        assert listed == expected
        assert message.link == f"/studies/{reg.study.code}/released/{release.number}/"
        assert reg.demonstrator.designator not in message.body and reg.headset.headset_id not in message.body
    by_user = {n.recipient: n for n in reached}
    assert by_user[silent].email == Email.NO_ADDRESS and by_user[mailed].email == Email.PENDING
    assert deliver_queued() == 1
    assert [m.to for m in mail.outbox] == [["mailed@lab.example"]]
    assert all(name in mail.outbox[0].body for name in expected)

    page = f"/studies/{reg.study.code}/released/{release.number}/"
    client.force_login(silent)
    shown = client.get(page).content.decode()
    assert "you were sent the list" not in shown
    assert "in your inbox" in shown and "no email address: shown in your inbox" in shown
    inbox = client.get("/notifications/").content.decode()
    assert all(name in inbox for name in expected) and 'data-kind="withdrawal_reached" class="unread"' in inbox
    client.force_login(mailed)
    assert "in your inbox; email to m…@lab.example delivered at " in client.get(page).content.decode()
    client.force_login(untouched)
    assert "nothing of yours to delete" in client.get(page).content.decode()
    assert not Notification.objects.filter(recipient=untouched, kind=Kind.WITHDRAWAL_REACHED).exists()

    client.force_login(reg.ethics)
    steward = client.get(f"/studies/{reg.study.code}/withdrawals/{withdrawal.pk}/").content.decode()
    assert f"{silent.username}: told " in steward and "in their inbox only (no email address)" in steward
    assert "in their inbox; email delivered" in steward and "mailed@lab.example" not in steward
    assert successor.state == ReleaseRequest.State.AWAITING_APPROVAL
    waiting = Notification.objects.filter(kind=Kind.RELEASE_AWAITS_APPROVAL,
                                          link=f"/studies/{reg.study.code}/releases/{successor.number}/")
    assert reg.ethics in {n.recipient for n in waiting}  # its officers are told it waits for their review
    assert reg.coordinator not in {n.recipient for n in waiting}  # the requester is not an approver

    with scope(study=reg.study):  # run again: nobody is told twice
        Withdrawal.objects.filter(pk=withdrawal.pk).update(state=Withdrawal.State.RUNNING, lease_until=None)
        withdrawals.apply_withdrawal(withdrawal.pk)
        assert WithdrawalNotice.objects.filter(withdrawal=withdrawal).count() == 2
    assert Notification.objects.filter(kind=Kind.WITHDRAWAL_REACHED).count() == 2
