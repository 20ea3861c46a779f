"""The coordinator's registry journey in a real browser, with the ethics officer's acceptance in between."""

import re

import pytest
from playwright.sync_api import expect

from exporter.designator import family_pair

HEADSET = "HS-DEMO-07"


@pytest.mark.django_db(transaction=True)
def test_coordinator_registers_headset_demonstrator_consent_and_withdrawal(demo, page, login, shot):
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/studies/demo/headsets/")
    page.fill("#id_headset_id", HEADSET)
    page.fill("#id_model", "Quest 3")
    page.click("#register-headset button[type=submit]")
    expect(page.locator(f'tr[data-headset="{HEADSET}"]')).to_have_count(1)
    page.fill("#id_headset_id", HEADSET)
    page.click("#register-headset button[type=submit]")
    expect(page.locator(".errorlist", has_text="is already registered in study demo")).to_have_count(1)
    shot(page, "registry-headsets")

    page.goto("/studies/demo/consent-documents/")
    page.fill("#id_identifier", "ICF-2026-03")
    page.fill("#id_version", "1")
    page.set_input_files("#id_document", files=[{"name": "icf.txt", "mimeType": "text/plain",
                                                 "buffer": b"I agree to take part in the CERES demo study."}])
    page.click("#upload-document button[type=submit]")
    expect(page.locator('#pending-documents tr[data-document="ICF-2026-03-1"]')).to_have_count(1)
    page.click("text=Sign out")

    login(page, "ethics1", "ceres-demo-ethics1")
    page.goto("/studies/demo/consent-documents/")
    shot(page, "registry-consent-documents-pending")
    page.click('#pending-documents tr[data-document="ICF-2026-03-1"] button')
    expect(page.locator(".messages", has_text="ICF-2026-03 v1 accepted")).to_have_count(1)
    page.click("text=Sign out")

    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/studies/demo/demonstrators/")
    page.fill("#id_headset", HEADSET)
    page.click("button[name=generate]")
    word1, word2 = family_pair(HEADSET)
    expect(page.locator("h1 code")).to_have_text(re.compile(rf"^{word1}-{word2}-[a-z]+-[a-z]+$"))

    page.select_option("#id_document", label="ICF-2026-03 v1")
    page.click("#give-consent button[type=submit]")
    expect(page.locator("tr.event-given")).to_have_count(1)
    expect(page.locator("tr.coverage").first).to_contain_text("consent of")
    shot(page, "registry-demonstrator-consent")

    page.fill("#id_reason", "Asked by e-mail to leave the study.")
    page.once("dialog", lambda dialog: dialog.accept())  # "Record the withdrawal of ...?"
    page.click("#withdraw-consent button[type=submit]")
    # The withdrawal opens its page (its reach, and the job that acts on it); the designator leads back.
    expect(page.locator(".messages", has_text="Withdrawal recorded")).to_have_count(1)
    expect(page.locator("h1")).to_contain_text("Withdrawal of")
    page.click("#demonstrator-link")
    expect(page.locator("tr.event-withdrawn", has_text="Asked by e-mail")).to_have_count(1)
    expect(page.locator("tr.coverage", has_text="consent withdrawn on")).to_have_count(2)
    shot(page, "registry-demonstrator-withdrawn")

    page.goto("/studies/demo/")
    expect(page.locator('[data-count="demonstrators"]')).to_have_text("1")
    shot(page, "registry-overview")
