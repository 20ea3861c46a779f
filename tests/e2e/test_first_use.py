"""What a new user stumbled on, at 1280 px: error pages in the portal's layout, the site administrator's
dashboard, one name per role, identifiers and counts that stay on their line, quarantine reasons that link
to their fix, a favicon, and the admin's audit list within the page. Screenshots go to the test output."""

from __future__ import annotations

import io
import re
from urllib.parse import urlparse

import pytest
from django.core.management import call_command
from django_scopes import scope
from playwright.sync_api import expect

from portal.recordings.models import Recording
from portal.recordings.services.export import export_recording

pytestmark = pytest.mark.django_db(transaction=True)

PORTAL_BACKGROUND = "rgb(246, 248, 250)"  # body background of ceres.css: the page is styled by the portal


@pytest.fixture
def demo_data(demo, settings, tmp_path, monkeypatch):
    """The demo study with its recordings exported in this process (no worker runs here; nothing is enqueued)."""
    from portal.core import queue

    settings.STORAGES = {**settings.STORAGES, **{
        name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
               "OPTIONS": {"location": str(tmp_path / "storage" / name)}} for name in settings.STORAGE_NAMES}}
    monkeypatch.setattr(queue, "send", lambda name, *args: None)
    call_command("demo_recordings", stdout=io.StringIO())
    with scope(study=demo):
        for pk in Recording.objects.filter(state=Recording.State.QUEUED).values_list("pk", flat=True):
            export_recording(pk)
    return demo


def sign_in(page, login, username: str) -> None:
    login(page, username, f"ceres-demo-{username}")


def assert_portal_error_page(page, status: int, response) -> None:
    assert response.status == status
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == PORTAL_BACKGROUND
    expect(page.locator(".topbar .brand")).to_have_text("CERES Portal")
    expect(page.locator(".error-page .next a", has_text="Go to your dashboard")).to_have_count(1)


def test_error_pages_are_in_the_portal_layout_and_lead_somewhere(demo, page, login, shot, settings):
    settings.ROOT_URLCONF = "tests.portal.core.error_urls"
    sign_in(page, login, "ethics1")

    assert_portal_error_page(page, 403, page.goto("/studies/demo/headsets/"))
    expect(page.locator("#needed-role")).to_contain_text("needs the role Study coordinator in study demo")
    expect(page.locator("#needed-role")).to_contain_text("You hold Ethics officer there.")
    expect(page.locator(".topbar nav a", has_text="Dashboard")).to_have_count(1)
    shot(page, "error-403")
    page.click("text=Back to study demo")
    assert urlparse(page.url).path == "/studies/demo/"

    assert_portal_error_page(page, 404, page.goto("/studies/demo/recordings/00000000-0000-0000-0000-000000000000/"))
    expect(page.locator("h1")).to_have_text("Page not found")
    shot(page, "error-404")

    assert_portal_error_page(page, 400, page.goto("/fail/400/"))
    shot(page, "error-400")
    assert_portal_error_page(page, 500, page.goto("/fail/500/"))
    shot(page, "error-500")
    page.click("text=Go to your dashboard")
    assert urlparse(page.url).path == "/"


def test_site_administrator_sees_every_study_and_where_to_manage_it(demo, page, login, shot):
    sign_in(page, login, "admin")
    row = page.locator("#site-studies tr[data-study=demo]")
    expect(row).to_contain_text("Demo: kitchen pick-and-place")
    expect(row).to_contain_text("Ethics officer 2")
    expect(page.locator("main")).not_to_contain_text("ask a site administrator")
    shot(page, "dashboard-site-administrator")
    row.locator("a", has_text="Role grants").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(4)


def test_each_role_has_one_name_on_every_page(demo, page, login, shot):
    sign_in(page, login, "ethics1")
    expect(page.locator(".topbar .role-tag")).to_have_text(["Ethics officer"])
    expect(page.locator(".panel h3 small")).to_have_text(["as Ethics officer"])
    page.goto("/studies/demo/")
    expect(page.locator("main .role-tag")).to_have_text(["Ethics officer"])
    shot(page, "overview-ethics-officer")


def test_counts_stay_beside_their_labels_and_identifiers_on_one_line(demo_data, page, login, shot):
    sign_in(page, login, "coordinator")
    # Every count on the same line as the start of its label, right of it.
    misplaced = page.evaluate("""() => [...document.querySelectorAll('.items li .count')].filter(count => {
        const label = count.previousElementSibling.getBoundingClientRect(), box = count.getBoundingClientRect();
        return !(box.top < label.top + box.height && box.left >= label.right - 1);
      }).map(count => count.parentElement.innerText)""")
    assert page.locator(".items li .count").count() >= 6 and misplaced == []
    shot(page, "dashboard-coordinator")

    page.goto("/studies/demo/recordings/")
    expect(page.locator("#recordings tbody tr")).to_have_count(4)
    wrapped = page.evaluate("""() => [...document.querySelectorAll('#recordings tbody td')]
      .filter(cell => [0, 1, 2, 3, 5].includes(cell.cellIndex))
      .filter(cell => { const range = document.createRange(); range.selectNodeContents(cell);
                        return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1; })
      .map(cell => cell.innerText)""")
    assert wrapped == [], "identifiers, dates and episode folders stay on one line"
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    shot(page, "recordings-list")


def test_a_quarantine_reason_links_to_its_fix_and_a_recheck_then_accepts(demo_data, page, login, shot):
    sign_in(page, login, "coordinator")
    page.goto("/studies/demo/recordings/?state=quarantined")
    page.click("#recordings a:has-text('demo-kitchen-0003')")
    expect(page.locator("#reason")).to_contain_text("headset 'DEMO-HS-99' is not registered in study demo")
    expect(page.locator("#source")).to_contain_text("(claimed: DEMO-HS-99)")
    recording_url = page.url
    shot(page, "recording-quarantined")

    page.click("#fixes a:has-text('Headsets')")
    assert urlparse(page.url).path == "/studies/demo/headsets/"
    page.fill("#id_headset_id", "DEMO-HS-99")
    page.click("#register-headset button[type=submit]")
    expect(page.locator("tr[data-headset='DEMO-HS-99']")).to_have_count(1)

    page.goto(recording_url)
    page.click("text=Re-check against the registry")
    expect(page.locator(".messages")).to_contain_text("The registry now covers this recording")
    expect(page.locator("#fixes")).to_have_count(0)
    shot(page, "recording-rechecked")


def test_favicon_and_the_admin_audit_list_fit_without_errors(demo_data, page, login, shot):
    failures: list[str] = []
    page.on("console", lambda message: message.type == "error" and failures.append(message.text))
    page.on("response", lambda reply: reply.status >= 400 and failures.append(f"{reply.status} {reply.url}"))
    sign_in(page, login, "admin")
    icon = page.request.get(page.locator("link[rel=icon]").get_attribute("href"))
    assert icon.ok and icon.headers["content-type"].startswith("image/svg")
    legacy = page.request.get("/favicon.ico")
    assert legacy.ok and legacy.headers["content-type"] in ("image/x-icon", "image/vnd.microsoft.icon")

    page.goto("/admin/audit/auditevent/")
    expect(page.locator("#result_list tbody tr").first).to_be_visible()
    overflow = page.evaluate("""() => { const results = document.querySelector('#changelist .results');
        return {hidden: results.scrollWidth - results.clientWidth,
                right: Math.max(...[...document.querySelectorAll('#result_list th')]
                                    .map(th => th.getBoundingClientRect().right))}; }""")
    assert overflow["hidden"] <= 0 and overflow["right"] <= 1280, overflow
    expect(page.locator("#result_list thead")).to_contain_text(re.compile("target", re.IGNORECASE))
    shot(page, "admin-audit-events")
    page.goto("/")
    page.goto("/admin/")
    assert failures == []
