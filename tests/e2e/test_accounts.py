"""A person runs their own account in the browser: the email address confirmed by its link, a password change, a
reset by email from the sign-in page, and the recovery codes shown once at enrolment. The mail is Django's (captured
in ``mailoutbox``: the live server runs in this process)."""

from __future__ import annotations

import base64
import re

import pytest
from django.contrib.auth import get_user_model
from django_otp.oath import totp

pytestmark = pytest.mark.django_db(transaction=True)


def _path_in(message, start: str) -> str:
    [path] = [p for p in re.findall(r"https?://[^/\s]+(/\S+)", message.body) if p.startswith(start)]
    return path


def test_a_researcher_confirms_an_address_changes_and_resets_the_password(demo, page, login, shot, mailoutbox):
    login(page, "researcher", "ceres-demo-researcher")
    page.goto("/accounts/")
    assert page.inner_text("#confirmed-email") == "researcher@demo.ceres.invalid"  # demo_setup confirmed it
    page.fill("#id_address", "r.lab@example.org")
    page.click("text=Send a confirmation link")
    page.wait_for_load_state("networkidle")
    assert "Waiting for confirmation: r.lab@example.org" in page.inner_text("#email")
    assert page.inner_text("#confirmed-email") == "researcher@demo.ceres.invalid"
    shot(page, "account-email-waiting")
    [message] = mailoutbox
    assert message.to == ["r.lab@example.org"]
    page.goto(_path_in(message, "/accounts/email/confirm/"))
    page.click("text=Confirm this address")
    page.wait_for_load_state("networkidle")
    assert page.inner_text("#confirmed-email") == "r.lab@example.org"
    shot(page, "account-page")

    page.click("text=Change your password")
    page.fill("#id_old_password", "ceres-demo-researcher")
    page.fill("#id_new_password1", "a-longer-lab-secret-1")
    page.fill("#id_new_password2", "a-longer-lab-secret-1")
    page.click("button:has-text('Change password')")
    page.wait_for_url("**/accounts/")
    assert "Password changed" in page.inner_text(".messages")
    assert mailoutbox[-1].to == ["r.lab@example.org"] and "password was changed" in mailoutbox[-1].subject

    page.click("text=Sign out")
    page.wait_for_url("**/accounts/login/")
    page.click("text=Forgot your password?")
    page.fill("#id_email", "r.lab@example.org")
    shot(page, "password-reset")
    page.click("text=Send the link")
    page.wait_for_load_state("networkidle")
    assert "Check your mail" in page.inner_text("main")
    page.goto(_path_in(mailoutbox[-1], "/accounts/password/reset/"))
    page.fill("#id_new_password1", "the-reset-lab-secret-2")
    page.fill("#id_new_password2", "the-reset-lab-secret-2")
    shot(page, "password-reset-new")
    page.click("button:has-text('Set password')")
    page.wait_for_load_state("networkidle")
    assert "Password set" in page.inner_text("main")
    login(page, "researcher", "the-reset-lab-secret-2")
    assert page.url.endswith("/") and "researcher" in page.inner_text("header")
    assert get_user_model().objects.get(username="researcher").check_password("the-reset-lab-secret-2")


def test_a_coordinator_enrols_and_keeps_the_recovery_codes_shown_once(demo, page, login, shot):
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/accounts/")
    page.click("text=Set up an authenticator app")
    secret = page.inner_text("#totp-secret")
    page.fill("#id_code", f"{totp(base64.b32decode(secret)):06d}")
    page.click("button:has-text('Confirm')")
    codes = page.locator("#recovery-codes li").all_inner_texts()
    assert len(codes) == 10 and all(re.fullmatch(r"[a-z2-7]{4}(-[a-z2-7]{4}){3}", c) for c in codes)
    shot(page, "recovery-codes")
    page.click("text=I have kept them: continue")
    page.wait_for_url("**/")
    page.goto("/accounts/")
    assert "10 unused recovery codes" in page.inner_text("#second-factor")
    assert codes[0] not in page.content()

    page.click("text=Sign out")
    login(page, "coordinator", "ceres-demo-coordinator")
    assert "/accounts/second-factor/" in page.url
    assert "demo" not in page.inner_text("header")  # no study named before the second factor
    shot(page, "second-factor-before")
    page.click("text=Lost your authenticator? Use a recovery code")
    page.fill("#id_recovery_code", codes[0])
    page.click("button:has-text('Use recovery code')")
    page.wait_for_url("**/")
    assert "9 left" in page.inner_text(".messages") and "demo" in page.inner_text("header")
