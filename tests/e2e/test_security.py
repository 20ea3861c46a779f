"""The browser side of the security settings: nothing loads from elsewhere, nothing breaks the policy."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from django_otp.oath import totp


@pytest.fixture
def guarded(page, live_server):
    """The page with every request to another origin blocked, and policy violations collected."""
    portal = urlparse(live_server.url).netloc
    seen = {"blocked": [], "violations": []}

    def route(route):
        if urlparse(route.request.url).netloc == portal or route.request.url.startswith("data:"):
            route.continue_()
        else:
            seen["blocked"].append(route.request.url)
            route.abort()

    page.context.route("**/*", route)
    page.on("console", lambda message: "Content Security Policy" in message.text
            and seen["violations"].append(message.text))
    return page, seen


@pytest.mark.django_db(transaction=True)
def test_api_docs_work_with_only_the_portal_reachable(demo, guarded, login, shot):
    page, seen = guarded
    login(page, "researcher", "ceres-demo-researcher")
    page.goto("/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock-summary-path")
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert any("/api/studies/" in path for path in paths)
    assert any("/api/tokens/" in path for path in paths)
    shot(page, "api-docs")
    assert seen == {"blocked": [], "violations": []}


@pytest.mark.django_db(transaction=True)
def test_admin_and_account_pages_keep_the_policy_and_enrolment_works(demo, guarded, login, shot):
    page, seen = guarded
    login(page, "admin", "ceres-demo-admin")
    for path in ("/admin/", "/admin/auth/user/", "/admin/auth/user/add/", "/admin/access/rolegrant/add/"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
    page.goto("/accounts/")
    page.fill("#id_name", "workstation")
    page.click("text=Make token")
    key = page.input_value("#new-key-value")
    assert len(key) == 43
    shot(page, "account-token-made")
    page.click("text=Set up an authenticator app")
    secret = page.inner_text("#totp-secret")
    shot(page, "second-factor-enrolment")
    import base64

    page.fill("#id_code", f"{totp(base64.b32decode(secret)):06d}")
    page.click("button:has-text('Confirm')")
    assert len(page.locator("#recovery-codes li").all_inner_texts()) == 10  # shown once, after confirming
    page.click("text=I have kept them: continue")
    page.wait_for_url("**/")
    page.goto("/accounts/")
    assert "An authenticator app is set up" in page.inner_text("#second-factor")
    assert seen == {"blocked": [], "violations": []}
