"""Confirmation before an irreversible one-click action: the question is asked, saying no leaves everything as it
was, saying yes does it. A static script (the Content-Security-Policy forbids inline script). The upload button
is disabled while an upload runs."""

from __future__ import annotations

from datetime import date

import pytest
from django_scopes import scope
from playwright.sync_api import expect

from portal.recordings.demo import demo_registry
from portal.research.models import AccessRequest
from portal.research.services.access import request_access
from portal.studies.models import ConsentEvent
from portal.studies.services.study import current_data_use_agreement


def answering(page, accept: bool) -> list[str]:
    """Answer the next confirmation dialogs; returns the questions asked."""
    asked: list[str] = []

    def on_dialog(dialog):
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.on("dialog", on_dialog)
    return asked


@pytest.mark.django_db(transaction=True)
def test_revoke_cancel_and_withdrawal_ask_first(demo, browser, live_server, login):
    from django.contrib.auth import get_user_model

    agreement = current_data_use_agreement(demo)
    applicant = get_user_model().objects.get(username="applicant")
    asked = request_access(applicant, demo, purpose="grasp policies", version=agreement.version,
                           sha256=agreement.sha256)
    granted = AccessRequest.objects.get(researcher__username="researcher", study=demo)
    registry = demo_registry()

    def context():
        ctx = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 800})
        ctx.set_default_timeout(15_000)
        return ctx.new_page()

    # The coordinator revokes the researcher's access: dismissed, nothing changes; accepted, it is revoked.
    page = context()
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/studies/demo/access/")
    row = page.locator("tr[data-researcher=researcher]")
    row.locator("input[name=reason]").fill("the project ended")
    questions = answering(page, accept=False)
    row.locator("button", has_text="Revoke").click()
    page.wait_for_load_state("networkidle")  # a submit, had one been sent, would have started by now
    assert questions == ["Revoke the access of researcher? Their links stop working at once."]
    granted.refresh_from_db()
    assert granted.state == AccessRequest.State.GRANTED
    page.close()

    page = context()
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/studies/demo/access/")
    row = page.locator("tr[data-researcher=researcher]")
    row.locator("input[name=reason]").fill("the project ended")
    answering(page, accept=True)
    row.locator("button", has_text="Revoke").click()
    page.wait_for_load_state("networkidle")
    granted.refresh_from_db()
    assert granted.state == AccessRequest.State.REVOKED

    # Recording a consent withdrawal asks first; dismissed, no withdrawal is recorded.
    page.close()
    page = context()
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto(f"/studies/demo/demonstrators/{registry.demonstrator.pk}/")
    page.fill("#withdraw-form [name=withdrawal_date]", date.today().isoformat())
    page.fill("#withdraw-form [name=reason]", "asked by phone")
    questions = answering(page, accept=False)
    page.click("#withdraw-form button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert len(questions) == 1 and questions[0].startswith(f"Record the withdrawal of {registry.demonstrator}?")
    with scope(study=demo):
        assert not ConsentEvent.objects.filter(demonstrator=registry.demonstrator,
                                               kind=ConsentEvent.Kind.WITHDRAWN).exists()
    page.close()

    # The applicant withdraws their own request: asked first, then cancelled.
    page = context()
    login(page, "applicant", "ceres-demo-applicant")
    page.goto("/research/")
    questions = answering(page, accept=True)
    page.locator("form[data-confirm] button", has_text="Cancel").click()
    page.wait_for_load_state("networkidle")
    assert questions == ["Withdraw your request for access to demo?"]
    asked.refresh_from_db()
    assert asked.state == AccessRequest.State.CANCELLED
    page.close()


@pytest.mark.django_db(transaction=True)
def test_the_upload_button_is_disabled_while_an_upload_runs(demo, page, login, tmp_path):
    from portal.recordings.models import Recording

    not_a_zip = tmp_path / "notes.zip"
    not_a_zip.write_bytes(b"these are not the bytes of a ZIP archive\n" * 100)
    held = []
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/studies/demo/recordings/")
    page.route("**/studies/demo/recordings/upload/", lambda route: held.append(route))  # held until released
    page.set_input_files("#id_source", str(not_a_zip))
    button = page.locator("#upload-form button[type=submit]")
    button.click()
    expect(button).to_be_disabled()
    button.click(force=True)  # a second click while it runs sends nothing more
    assert len(held) == 1
    held[0].continue_()
    page.wait_for_url("**/studies/demo/recordings/*-*-*-*-*/")  # received (and quarantined later: not a ZIP)
    with scope(study=demo):
        assert Recording.objects.count() == 1  # one upload, not two
