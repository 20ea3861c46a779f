"""The fixity alert in the browser: a fixity run finds an object that no record accounts for under the demo study's
shards; the ethics officer sees the banner on the dashboard, opens the alert from it, acknowledges it with a note
(the banner goes), and resolves it; screenshots of each step."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django_scopes import scope

from portal.core import queue
from portal.fixity.models import Alert
from portal.fixity.services import runs


@pytest.fixture
def orphan(demo, settings, tmp_path, monkeypatch):
    """Storage folders of the test's own, an object put by hand under the demo study's shards, and a fixity run
    that found it (its email recorded, not sent: no worker here)."""
    settings.STORAGES = {**settings.STORAGES, **{
        name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
               "OPTIONS": {"location": str(tmp_path / "storage" / name)}} for name in settings.STORAGE_NAMES}}
    sent = []
    monkeypatch.setattr(queue, "send", lambda name, *args: sent.append((name, args)))
    storages["shards"].save("demo/left-behind.bin", ContentFile(b"copied here by hand"))
    run = runs.run_fixity("test", full=True, studies=[demo])
    assert run.problem_count == 1
    with scope(study=demo):
        return Alert.objects.get()


@pytest.mark.django_db(transaction=True)
def test_an_ethics_officer_sees_the_banner_opens_the_alert_and_acknowledges_it(demo, orphan, page, login, shot):
    login(page, "ethics1", "ceres-demo-ethics1")
    banner = page.locator(".alert-banner [data-study=demo]")
    assert "1 open integrity alert" in banner.inner_text()
    shot(page, "fixity-banner-dashboard")

    banner.locator("a", has_text="Review and acknowledge").click()
    page.wait_for_load_state("networkidle")
    row = page.locator(f"#alerts tr[data-alert='{orphan.pk}']")
    assert row.get_attribute("data-state") == "open" and "demo/left-behind.bin" in row.inner_text()
    row.locator("a").first.click()
    page.wait_for_load_state("networkidle")
    assert page.locator("#problems tr[data-kind=orphan]").count() == 1
    assert "shards:demo/left-behind.bin" in page.locator("#problems").inner_text()
    shot(page, "fixity-alert-open")

    page.fill("#acknowledge textarea", "Looking at who copied it there; the gateway's access log first.")
    page.click("#acknowledge button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert page.locator("#alert").get_attribute("data-state") == "acknowledged"
    assert page.locator(".alert-banner").count() == 0
    assert "the gateway's access log first" in page.locator("#acknowledged-note").inner_text()
    shot(page, "fixity-alert-acknowledged")

    page.fill("#resolve textarea", "A test copy; deleted it.")
    page.click("#resolve button[type=submit]")
    page.wait_for_load_state("networkidle")
    assert page.locator("#alert").get_attribute("data-state") == "resolved"
    assert page.locator("#resolve").count() == 0
    shot(page, "fixity-alert-resolved")
    orphan.refresh_from_db()
    assert (orphan.state, orphan.acknowledged_by, orphan.resolved_by) == (
        Alert.State.RESOLVED, *[get_user_model().objects.get(username="ethics1")] * 2)
