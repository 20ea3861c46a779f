from urllib.parse import urlparse

import pytest

ROLES = [("coordinator", "Coordination"), ("ethics1", "Ethics review"), ("researcher", "Research data")]


@pytest.mark.django_db(transaction=True)
def test_each_demo_role_logs_in_and_reaches_its_dashboard(demo, page, login, shot):
    for username, panel_title in ROLES:
        login(page, username, f"ceres-demo-{username}")
        assert urlparse(page.url).path == "/"
        heading = page.locator("h1")
        assert heading.inner_text() == "Dashboard"
        assert page.locator(".panel h3", has_text=panel_title).count() == 1
        shot(page, f"dashboard-{username}")
        page.click("text=Sign out")
        page.wait_for_url("**/accounts/login/")
