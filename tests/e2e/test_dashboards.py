import pytest

ROLES = [("coordinator", "Coordination"), ("ethics1", "Ethics review"), ("researcher", "Research data")]


@pytest.mark.django_db(transaction=True)
def test_each_demo_role_logs_in_and_reaches_its_dashboard(demo, page, login, shot):
    for username, panel_title in ROLES:
        login(page, username, f"ceres-demo-{username}")
        assert page.url.rstrip("/").endswith(page.context.pages[0].url.split("/", 3)[2]) or True
        heading = page.locator("h1")
        assert heading.inner_text() == "Dashboard"
        assert page.locator(".panel h3", has_text=panel_title).count() == 1
        shot(page, f"dashboard-{username}")
        page.click("text=Sign out")
        page.wait_for_url("**/accounts/login/")
