"""Each person's inbox along the governance path, in Chromium at 1280 px: the ethics officer is told a release
awaits approval, the requester that it was approved and published, a researcher that their access was granted
and, after a withdrawal, which files to delete (one with an email address, one without, told in the inbox all
the same); the pages say what was delivered and where. The portal's work is done by its services in this
process (the worker's journeys have their own tests); email goes through Django's test backend."""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta

import pytest
from django.core import mail
from django_scopes import scope

from portal.notifications import services
from portal.notifications.models import Email, Notification
from portal.releases.models import ReleaseRequest
from portal.releases.services import publish
from portal.releases.services.approval import approve
from portal.research.models import Withdrawal
from portal.research.services import links, withdrawals
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.consent import give_consent
from portal.studies.services.demonstrators import create_demonstrator
from tests.portal.research import conftest as research

(make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker, team,
 verified_factory, verified, make_request, agreement, make_researcher) = (
    research.make_capture, research.make_registry, research.private_storage, research.reg, research.sent_tasks,
    research.stored_objects, research.unique_code, research.worker, research.team, research.verified_factory,
    research.verified, research.make_request, research.agreement, research.make_researcher)
PASSWORD = "pw-" * 4


def deliver_all() -> None:
    for pending in Notification.objects.filter(email=Email.PENDING):
        services.deliver(pending.pk)


def sign_in(page, user) -> None:
    page.context.clear_cookies()
    page.goto("/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def inbox_titles(page) -> list[str]:
    page.goto("/notifications/")
    return [text.strip() for text in page.locator("table.inbox td:nth-child(3) > a").all_inner_texts()]


@pytest.mark.django_db(transaction=True)
def test_each_persons_inbox_along_the_path(reg, team, verified_factory, make_request, make_researcher, page, shot):
    code = reg.study.code
    with scope(study=reg.study):
        other = create_demonstrator(reg.coordinator, reg.study, headset=reg.headset)
        give_consent(reg.coordinator, other, document=reg.document, consent_date=date.today() - timedelta(days=30),
                     scopes=["episode_release"])
    second = dataclasses.replace(reg, demonstrator=other)
    reg.ethics.email = "ethics@lab.example"
    reg.ethics.save(update_fields=["email"])
    request = make_request([verified_factory(reg), verified_factory(second)])
    deliver_all()
    name = f"{request.release_id} of study {code}"

    sign_in(page, reg.ethics)  # the officer is told of the request, in the header and the inbox
    assert page.locator(".who .badge").inner_text() == "1"
    assert inbox_titles(page) == [f"{name} awaits your approval"]
    assert "email to e…@lab.example delivered at" in page.locator("table.inbox .delivery").inner_text()
    shot(page, "inbox-officer")
    page.click(f"text={name} awaits your approval")
    page.wait_for_url(f"**/studies/{code}/releases/{request.number}/")
    assert page.locator(".who .badge").count() == 0  # opened: read

    with scope(study=reg.study):
        for officer in (reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
        publish.publish_release(request.pk)
        request = ReleaseRequest.objects.get(pk=request.pk)
    assert request.state == ReleaseRequest.State.RELEASED
    sign_in(page, reg.coordinator)  # the requester is told of the approval and the publication
    assert inbox_titles(page) == [f"{name} was published", f"{name} was approved"]
    assert page.locator("table.inbox .delivery").first.inner_text() == "no email address: shown in your inbox"
    shot(page, "inbox-requester")

    mailed, silent = make_researcher("mailed"), make_researcher("silent")
    mailed.email = "mailed@lab.example"
    mailed.save(update_fields=["email"])
    with scope(study=reg.study):
        for user in (mailed, silent):
            links.release_links(user, request, ["episode-000000/meta/info.json"], via="api")
    sign_in(page, silent)  # the researcher is told of the grant
    assert inbox_titles(page) == [f"Your access to study {code} was granted"]

    with scope(study=reg.study):
        event = withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(),
                                 reason="asked by the participant")
        withdrawal = Withdrawal.objects.get(event=event)
        withdrawals.apply_withdrawal(withdrawal.pk)
    deliver_all()
    deleted = f"{request.release_id}/episode-000000/meta/info.json"
    assert [m.to for m in mail.outbox if deleted in m.body] == [["mailed@lab.example"]]

    page.reload()  # the researcher without an email address is told in the inbox, with the file list
    assert inbox_titles(page)[0] == f"Delete data of study {code}: consent was withdrawn"
    row = page.locator("table.inbox tbody tr").first
    assert deleted in row.inner_text() and "no email address: shown in your inbox" in row.inner_text()
    shot(page, "inbox-withdrawal-no-email")
    page.goto(f"/studies/{code}/released/{request.number}/")
    assert "no email address: shown in your inbox" in page.locator("#superseded").inner_text()
    assert "you were sent" not in page.content()
    shot(page, "withdrawal-release-page-no-email")

    sign_in(page, mailed)
    page.goto(f"/studies/{code}/released/{request.number}/")
    assert "email to m…@lab.example delivered at" in page.locator("#superseded").inner_text()
    shot(page, "withdrawal-release-page-email")
    page.goto("/accounts/")
    switches = page.locator("#email-switches")
    assert "m…@lab.example" in switches.inner_text()
    switches.locator("input[value=dataset_ready]").uncheck()
    switches.locator("button[type=submit]").click()
    page.wait_for_load_state("networkidle")
    assert page.locator(".messages").inner_text().startswith("Email on for 14 of 15 kinds")
    assert not page.locator("#email-switches input[value=dataset_ready]").is_checked()
    shot(page, "account-email-switches")

    sign_in(page, reg.ethics)
    page.goto(f"/studies/{code}/withdrawals/{withdrawal.pk}/")
    told = page.locator("#notices").inner_text()
    assert f"{silent.username}: told" in told and "in their inbox only (no email address)" in told
    assert f"{mailed.username}: told" in told and "in their inbox; email delivered" in told
    assert "mailed@lab.example" not in page.content()
    shot(page, "withdrawal-researchers-told")
