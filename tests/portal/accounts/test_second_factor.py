"""The second factor (TOTP): required of ethics officers and staff when CERES_REQUIRE_2FA is on."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts import services
from tests.portal.accounts.conftest import events


@pytest.fixture
def require_2fa(settings):
    settings.CERES_REQUIRE_2FA = True


@pytest.fixture
def ethics(make_user, study):
    return make_user("eth", study, ["ethics_officer"], password="ethics-password-1")


def _sign_in(client, username: str, password: str, next_url: str = ""):
    target = reverse("login") + (f"?next={next_url}" if next_url else "")
    return client.post(target, {"username": username, "password": password, "next": next_url}, follow=True)


def _code(device: TOTPDevice, steps_ahead: int = 0) -> str:
    return f"{totp(device.bin_key, drift=steps_ahead):06d}"


def test_an_ethics_officer_must_enrol_then_pass_the_code_at_each_sign_in(client, require_2fa, ethics, study):
    overview = reverse("study-overview", args=[study.code])
    page = _sign_in(client, "eth", "ethics-password-1", overview)
    assert page.redirect_chain[-1][0].startswith(reverse("second-factor"))
    # Enrolment first asks for a site administrator's enrolment code; no secret is shown before it.
    assert b"Enrolment code from a site administrator" in page.content and b"<svg" not in page.content
    # Nothing else opens before the second factor: pages redirect, the API refuses the session.
    assert client.get(overview).status_code == 302
    assert client.get("/api/studies/").status_code == 403

    _, enrolment_code = services.issue_enrolment_code("manage.py issue_enrolment_code", ethics)
    entered = client.post(reverse("second-factor"), {"enrolment_code": enrolment_code.lower(), "next": overview},
                          follow=True)
    assert b"Set up your second factor" in entered.content and b"<svg" in entered.content
    device = TOTPDevice.objects.get(user=ethics, confirmed=False)
    wrong = client.post(reverse("second-factor"), {"code": "000000" if _code(device) != "000000" else "111111"})
    assert wrong.status_code == 400 and b"not the current one" in wrong.content
    done = client.post(reverse("second-factor"), {"code": _code(device), "next": overview})
    # Enrolment ends by showing the recovery codes once, then goes on where the officer was headed.
    assert done.status_code == 200 and b"Your recovery codes" in done.content
    assert f'href="{overview}"'.encode() in done.content
    assert client.get(overview).status_code == 200
    assert events("accounts.second_factor_enrolled")[0].target_label == "eth"

    client.post(reverse("logout"))
    page = _sign_in(client, "eth", "ethics-password-1")
    assert b"Enter the six-digit code" in page.content
    assert client.get(reverse("dashboard")).status_code == 302
    # The enrolment's code cannot be replayed; the next one passes.
    assert client.post(reverse("second-factor"), {"code": _code(device, 1)}).status_code == 302
    assert client.get(reverse("dashboard")).status_code == 200
    assert len(events("accounts.second_factor_passed")) == 1


def test_wrong_codes_slow_down_further_tries(client, ethics):
    device = TOTPDevice.objects.create(user=ethics, name="phone", confirmed=True)
    wrong = "000001" if _code(device) != "000001" else "000002"
    with pytest.raises(services.AccountError, match="wrong or expired code"):
        services.check_second_factor(ethics, wrong)
    # Even the right code is refused while the device waits after a failure.
    with pytest.raises(services.AccountError, match="too many wrong codes"):
        services.check_second_factor(ethics, _code(device))
    failed = events("accounts.second_factor_failed")
    assert [e.after["reason"] for e in failed] == ["wrong or expired code", "too many wrong codes; wait and try again"]


def test_staff_need_it_for_the_admin(client, require_2fa, make_user):
    admin = make_user("siteadmin", password="admin-password-1")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.post(reverse("admin:login"), {"username": "siteadmin", "password": "admin-password-1"})
    answer = client.get("/admin/auth/user/")
    assert answer.status_code == 302 and answer["Location"].startswith(reverse("second-factor"))


def test_a_researcher_is_not_asked_unless_they_enrolled(client, require_2fa, researcher):
    page = _sign_in(client, "res", "right-password-1")
    assert page.redirect_chain[-1][0] == reverse("dashboard")
    assert not services.second_factor_required(researcher)
    TOTPDevice.objects.create(user=researcher, name="phone", confirmed=True)
    assert services.second_factor_required(researcher)


def test_without_the_setting_nobody_is_asked(client, ethics, settings):
    assert settings.CERES_REQUIRE_2FA is False
    page = _sign_in(client, "eth", "ethics-password-1")
    assert page.redirect_chain[-1][0] == reverse("dashboard")


def test_removing_the_second_factor(require_2fa, ethics, researcher, make_user):
    TOTPDevice.objects.create(user=ethics, name="phone", confirmed=True)
    with pytest.raises(services.AccountError, match="your roles require"):
        services.remove_second_factor(ethics, ethics)
    with pytest.raises(services.AccountError, match="owner or a site administrator"):
        services.remove_second_factor(researcher, ethics)
    admin = make_user("siteadmin")
    admin.is_staff = True
    admin.save()
    services.remove_second_factor(admin, ethics)
    assert not TOTPDevice.objects.filter(user=ethics).exists()
    assert events("accounts.second_factor_removed")[0].actor_label == "siteadmin"
    TOTPDevice.objects.create(user=researcher, name="phone", confirmed=True)
    services.remove_second_factor(researcher, researcher)


def test_the_next_address_must_stay_on_the_portal(client, ethics):
    device = TOTPDevice.objects.create(user=ethics, name="phone", confirmed=True)
    client.force_login(ethics)
    answer = client.post(reverse("second-factor"), {"code": _code(device), "next": "https://evil.example/"})
    assert answer.status_code == 302 and answer["Location"] == reverse("dashboard")


def test_the_demo_says_whether_the_second_factor_is_on(db, settings, capsys):
    from django.core.management import call_command

    call_command("demo_setup")
    assert "Second factor: off (CERES_REQUIRE_2FA is not set)" in capsys.readouterr().out
    assert not TOTPDevice.objects.exists()
    settings.CERES_REQUIRE_2FA = True
    call_command("demo_setup")
    call_command("demo_setup")
    out = capsys.readouterr().out
    devices = {device.user.username: device for device in TOTPDevice.objects.select_related("user")}
    assert sorted(devices) == ["admin", "ethics1", "ethics2"]
    for username, device in devices.items():
        assert f"  {username:<12} {services.totp_secret(device)}" in out


# --- enrolment codes --------------------------------------------------------------------------


def _superuser(make_user, name: str = "siteadmin"):
    admin = make_user(name, password="admin-password-1")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    return admin


def test_an_ethics_officer_who_never_enrolled_cannot_enrol_or_approve_with_the_password_alone(client, require_2fa,
                                                                                                ethics, study):
    """A stolen password of an officer who never set up a second factor: enrolment asks for a code the thief does not
    have, shows no secret, and nothing else opens (an approval through the API included)."""
    page = _sign_in(client, "eth", "ethics-password-1")
    assert b"Enrolment code from a site administrator" in page.content
    assert b"<svg" not in page.content and b"totp-secret" not in page.content
    assert not TOTPDevice.objects.filter(user=ethics).exists()
    # Guessing a code, or posting an authenticator code, enrols nothing.
    guessed = client.post(reverse("second-factor"), {"enrolment_code": "AAAA-BBBB-CCCC-DDDD"})
    assert guessed.status_code == 400 and b"not valid for this account (wrong code)" in guessed.content
    assert client.post(reverse("second-factor"), {"code": "123456"}).status_code == 400
    assert not TOTPDevice.objects.filter(user=ethics).exists()
    approve = client.post(f"/api/studies/{study.code}/release-requests/1/approve/", {}, content_type="application/json")
    assert approve.status_code == 403 and "second factor" in approve.json()["detail"]
    assert client.get(reverse("study-overview", args=[study.code])).status_code == 302
    assert events("accounts.enrolment_code_refused")[0].after["reason"] == "wrong code"
    # An authenticator left waiting from before (its secret seen by whoever opened the old enrolment page)
    # cannot be confirmed without a code either.
    stale = TOTPDevice.objects.create(user=ethics, name="Authenticator app", confirmed=False)
    with pytest.raises(services.EnrolmentCodeNeeded):
        services.confirm_enrolment(ethics, _code(stale))
    with pytest.raises(services.EnrolmentCodeNeeded):
        services.start_enrolment(ethics)
    assert not TOTPDevice.objects.filter(user=ethics, confirmed=True).exists()


def test_staff_also_need_an_enrolment_code_and_a_reset_asks_for_one_again(client, require_2fa, make_user, ethics):
    staff = make_user("staffer", password="staff-password-1")
    staff.is_staff = True
    staff.save()
    assert services.awaiting_enrolment_code(staff, {}) and services.awaiting_enrolment_code(ethics, {})
    _, code = services.issue_enrolment_code("manage.py issue_enrolment_code", ethics)
    session = {}
    device = services.redeem_enrolment_code(ethics, code, session)
    services.confirm_enrolment(ethics, _code(device), session)
    assert not services.awaiting_enrolment_code(ethics, session) and session == {}
    services.remove_second_factor(_superuser(make_user), ethics)
    assert services.awaiting_enrolment_code(ethics, session)
    with pytest.raises(services.AccountError, match="already used"):
        services.redeem_enrolment_code(ethics, code, session)


def test_enrolment_codes_are_single_use_expiring_hashed_audited_and_only_a_superuser_issues_them(
        require_2fa, ethics, make_user, settings):
    from django.db import connection
    from django.utils import timezone

    from portal.accounts.models import EnrolmentCode

    admin = _superuser(make_user)
    staff_only = make_user("staffer")
    staff_only.is_staff = True
    staff_only.save()
    with pytest.raises(services.AccountError, match="only a site administrator"):
        services.issue_enrolment_code(staff_only, ethics)
    with pytest.raises(services.AccountError, match="your own account"):
        services.issue_enrolment_code(admin, admin)
    with pytest.raises(services.AccountError, match="1 to 72 hours"):
        services.issue_enrolment_code(admin, ethics, hours=73)

    _, first = services.issue_enrolment_code(admin, ethics, hours=1)
    row, code = services.issue_enrolment_code(admin, ethics)
    assert len(code.replace("-", "")) == 16
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_enrolmentcode")
        stored = repr(cursor.fetchall())
    assert code not in stored and first not in stored and code.replace("-", "") not in stored
    # A new code replaces the one before it.
    session = {}
    with pytest.raises(services.AccountError, match="expired"):
        services.redeem_enrolment_code(ethics, first, session)
    EnrolmentCode.objects.filter(pk=row.pk).update(expires_at=timezone.now())
    with pytest.raises(services.AccountError, match="expired"):
        services.redeem_enrolment_code(ethics, code, session)
    assert services.awaiting_enrolment_code(ethics, session)

    _, code = services.issue_enrolment_code(admin, ethics)
    device = services.redeem_enrolment_code(ethics, code.replace("-", " ").lower(), session, ip="192.0.2.5")
    assert services.start_enrolment(ethics, session) == device  # a reload shows the same secret
    with pytest.raises(services.AccountError, match="already used"):
        services.redeem_enrolment_code(ethics, code, {})
    services.confirm_enrolment(ethics, _code(device), session)
    with pytest.raises(services.AccountError, match="already has a second factor"):
        services.issue_enrolment_code(admin, ethics)

    issued = events("accounts.enrolment_code_issued")
    assert [e.actor_label for e in issued] == ["siteadmin"] * 3 and {e.target_label for e in issued} == {"eth"}
    assert [e.after["reason"] for e in events("accounts.enrolment_code_refused")] == [
        "expired", "expired", "already used"]
    [used] = events("accounts.enrolment_code_used")
    assert used.after == {"ip": "192.0.2.5", "issued_by": "siteadmin"}
    assert not any(code in str(e.after) for e in events("accounts.enrolment_code_issued"))


def test_a_superuser_issues_codes_in_the_admin_and_the_command_issues_them_too(client, require_2fa, ethics,
                                                                                make_user, capsys):
    import re

    from django.core.management import call_command
    from django.core.management.base import CommandError

    admin = _superuser(make_user)
    TOTPDevice.objects.create(user=admin, name="phone", confirmed=True)
    client.force_login(admin)
    session = client.session
    session["otp_device_id"] = TOTPDevice.objects.get(user=admin).persistent_id
    session.save()
    answer = client.post("/admin/auth/user/", {"action": "issue_enrolment_code", "_selected_action": [ethics.pk]})
    assert answer.status_code == 200 and "no-cache" in answer["Cache-Control"]
    code = re.search(r'<code class="enrolment-code">([A-Z2-7-]+)</code>', answer.content.decode()).group(1)
    assert services.redeem_enrolment_code(ethics, code, {}).user == ethics
    assert events("accounts.enrolment_code_issued")[0].actor_label == "siteadmin"

    call_command("issue_enrolment_code", "eth")
    printed = re.search(r"eth: enrolment code ([A-Z2-7-]+)", capsys.readouterr().out).group(1)
    assert services.redeem_enrolment_code(ethics, printed, {}).confirmed is False
    assert events("accounts.enrolment_code_issued")[-1].actor_label == "manage.py issue_enrolment_code"
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("issue_enrolment_code", "nobody")


def test_a_redeemed_code_opens_enrolment_in_its_own_session_only(client, require_2fa, ethics):
    """The officer redeems their code; whoever else holds the password and signs in meanwhile neither sees the
    new authenticator's secret nor confirms it."""
    from django.test import Client

    _sign_in(client, "eth", "ethics-password-1")
    _, enrolment_code = services.issue_enrolment_code("manage.py issue_enrolment_code", ethics)
    shown = client.post(reverse("second-factor"), {"enrolment_code": enrolment_code}, follow=True)
    assert b"totp-secret" in shown.content
    device = TOTPDevice.objects.get(user=ethics, confirmed=False)

    thief = Client()
    page = _sign_in(thief, "eth", "ethics-password-1")
    assert b"Enrolment code from a site administrator" in page.content
    assert services.totp_secret(device).encode() not in page.content and b"totp-secret" not in page.content
    assert thief.post(reverse("second-factor"), {"code": _code(device)}).status_code == 400
    assert not TOTPDevice.objects.filter(user=ethics, confirmed=True).exists()
    assert thief.get(reverse("dashboard")).status_code == 302

    confirmed = client.post(reverse("second-factor"), {"code": _code(device)})
    assert confirmed.status_code == 200 and b"Your recovery codes" in confirmed.content
    assert TOTPDevice.objects.get(user=ethics).confirmed
