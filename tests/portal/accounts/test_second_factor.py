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
    assert b"Set up your second factor" in page.content and b"<svg" in page.content
    # Nothing else opens before the second factor: pages redirect, the API refuses the session.
    assert client.get(overview).status_code == 302
    assert client.get("/api/studies/").status_code == 403

    device = TOTPDevice.objects.get(user=ethics, confirmed=False)
    wrong = client.post(reverse("second-factor"), {"code": "000000" if _code(device) != "000000" else "111111"})
    assert wrong.status_code == 400 and b"not the current one" in wrong.content
    done = client.post(reverse("second-factor"), {"code": _code(device), "next": overview})
    assert done.status_code == 302 and done["Location"] == overview
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
