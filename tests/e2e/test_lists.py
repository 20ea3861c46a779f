"""Long lists in the browser: a page of 50 with "showing N of M", Older/Newer links that keep the filters,
and the headset filter typed with suggestions from the registry (and working without them)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from portal.demo.seeding import seed_study

PASSWORD = "list-pages-" * 2


@pytest.mark.django_db(transaction=True)
def test_recordings_list_pages_and_filters(page, login, shot):
    seeded = seed_study("lists", episodes=120, headsets=12, demonstrators=20, password=PASSWORD)
    login(page, seeded.logins["coordinator"], PASSWORD)

    page.goto("/studies/lists/recordings/")
    expect(page.locator(".pager-count").first).to_have_text("Showing 50 of 120")
    expect(page.locator("#recordings tbody tr")).to_have_count(50)
    shot(page, "lists-recordings-first-page")

    page.locator("a[rel=next]").first.click()
    expect(page).to_have_url(re.compile(r"\?cursor="))
    expect(page.locator("#recordings tbody tr")).to_have_count(50)
    page.locator("a[rel=last]").first.click()
    expect(page.locator("#recordings tbody tr")).to_have_count(50)
    expect(page.locator("a[rel=next]")).to_have_count(0)
    page.locator("a[rel=first]").first.click()
    expect(page.locator("a[rel=prev]")).to_have_count(0)

    # Suggestions come from the registry while typing; the list filters on the exact ID chosen.
    page.locator("#id_headset").press_sequentially("HS-001", delay=30)
    options = page.locator("#headset-suggestions option")
    expect(options).to_have_count(3)  # HS-0010, HS-0011, HS-0012
    expect(options.first).to_have_attribute("value", "HS-0010")
    page.fill("#id_headset", "HS-0011")
    page.select_option("#id_state", "verified")
    page.click("#filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"headset=HS-0011.*|state=verified.*headset=HS-0011"))
    rows = page.locator("#recordings tbody tr")
    expect(rows.first).to_contain_text("HS-0011")
    for text in rows.all_inner_texts():
        assert "HS-0011" in text and "Verified" in text
    shot(page, "lists-recordings-filtered")


@pytest.mark.django_db(transaction=True)
def test_headset_filter_works_without_scripts(browser, live_server, shot):
    seeded = seed_study("noscript", episodes=30, headsets=3, demonstrators=4, password=PASSWORD)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 860},
                                  java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto("/accounts/login/")
        page.fill("#id_username", seeded.logins["coordinator"])
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.goto("/studies/noscript/recordings/")
        page.fill("#id_headset", "HS-0002")
        page.click("#filters button[type=submit]")
        expect(page).to_have_url(re.compile(r"headset=HS-0002"))
        texts = page.locator("#recordings tbody tr").all_inner_texts()
        assert texts and all("HS-0002" in text or "No recordings" in text for text in texts)
        shot(page, "lists-recordings-filter-without-scripts")
    finally:
        context.close()
