"""Login throttling: wrong passwords lock the account and the address; lockouts are audited and undone."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.accounts import services
from portal.audit.models import AuditEvent
from tests.portal.accounts.conftest import events

LOGIN = "/accounts/login/"


def _attempt(client, username: str, password: str, *, path: str = LOGIN, ip: str = "192.0.2.10"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_twenty_wrong_logins_lock_out_even_the_right_password_and_are_audited(client, researcher, coordinator,
                                                                               settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    answers = [_attempt(client, "res", f"guess-{n}").status_code for n in range(20)]
    # Four wrong passwords show the form again; the fifth locks; the rest are refused at once.
    assert answers == [200] * 4 + [429] * 16
    refused = _attempt(client, "res", "right-password-1")
    assert refused.status_code == 429
    assert b"Sign-in refused for now" in refused.content

    failed = events("accounts.login_failed")
    assert len(failed) == 21
    assert [e.after["reason"] for e in failed] == ["wrong credentials"] * 5 + ["locked out"] * 16
    assert {e.target_label for e in failed} == {"res"} and {e.after["ip"] for e in failed} == {"192.0.2.10"}
    locked = events("accounts.locked_out")
    assert len(locked) == 1 and locked[0].target_label == "res" and locked[0].after["failures"] == 5
    assert not any("right-password" in str(e.after) or "guess-" in str(e.after)
                   for e in AuditEvent.objects.all()), "a password reached the audit log"

    # The study's coordinator sees the lockout and lifts it.
    client.force_login(coordinator)
    page = client.get(reverse("study-lockouts", args=["alpha"]))
    assert b'data-username="res"' in page.content
    unlocked = client.post(reverse("study-lockouts", args=["alpha"]), {"username": "res"}, follow=True)
    assert b"res can sign in again" in unlocked.content
    assert events("accounts.lockout_cleared", username="res")[0].actor_label == "coord"
    client.logout()

    # Unlocking clears the account's counted failures (from every address): the right password works again.
    signed_in = _attempt(client, "res", "right-password-1")
    assert signed_in.status_code == 302 and signed_in["Location"] == reverse("dashboard")
    assert events("accounts.login", ip="192.0.2.10")[-1].target_label == "res"


def test_guessing_across_usernames_locks_the_address(client, researcher, make_user):
    for n in range(5):
        _attempt(client, f"nobody-{n}", "guess", ip="198.51.100.7")
    assert _attempt(client, "res", "right-password-1", ip="198.51.100.7").status_code == 429
    # Another address is not affected, and unknown usernames are not written into the audit log.
    assert _attempt(client, "res", "right-password-1", ip="198.51.100.8").status_code == 302
    client.logout()
    # A site administrator clears the address.
    services.unlock("admin", ip_address="198.51.100.7")
    assert events("accounts.lockout_cleared", ip_address="198.51.100.7")[0].after["attempts_cleared"] == 5
    assert _attempt(client, "res", "right-password-1", ip="198.51.100.7").status_code == 302
    failed = events("accounts.login_failed", ip="198.51.100.7")
    assert failed[0].after["account"] == "unknown" and failed[0].target_label == ""
    assert not any("nobody-" in str(e.after) + e.target_label for e in AuditEvent.objects.all())


def test_admin_login_is_throttled_too(client, make_user):
    admin = make_user("siteadmin", password="admin-password-1")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    path = reverse("admin:login")
    for n in range(5):
        _attempt(client, "siteadmin", f"guess-{n}", path=path)
    assert _attempt(client, "siteadmin", "admin-password-1", path=path).status_code == 429
    assert len(events("accounts.locked_out")) == 1


def test_a_coordinator_unlocks_only_members_of_their_study_and_not_administrators(coordinator, study, make_user,
                                                                                  make_study):
    outsider = make_user("outsider", make_study("beta"), ["researcher"])
    with pytest.raises(services.AccountError, match="holds no role in study alpha"):
        services.unlock_in_study(coordinator, study, outsider.username)
    staff = make_user("staffer", study, ["researcher"])
    staff.is_staff = True
    staff.save()
    with pytest.raises(services.AccountError, match="site administrator"):
        services.unlock_in_study(coordinator, study, "staffer")
    researcher = make_user("res2", study, ["researcher"])
    with pytest.raises(services.AccountError, match="only a coordinator"):
        services.unlock_in_study(researcher, study, "coord")


def test_success_resets_the_count(client, researcher):
    for n in range(4):
        _attempt(client, "res", f"guess-{n}")
    assert _attempt(client, "res", "right-password-1").status_code == 302
    client.logout()
    for n in range(4):
        assert _attempt(client, "res", f"again-{n}").status_code == 200


def test_the_command_unlocks_a_locked_out_administrator(client, make_user, capsys):
    from django.core.management import call_command

    make_user("siteadmin", password="admin-password-1")
    for n in range(5):
        _attempt(client, "siteadmin", f"guess-{n}", ip=f"203.0.113.{n}")
    assert _attempt(client, "siteadmin", "admin-password-1", ip="203.0.113.99").status_code == 429
    call_command("unlock_login", "--username", "siteadmin")
    assert "siteadmin: 5 failed attempt record(s) cleared" in capsys.readouterr().out
    assert _attempt(client, "siteadmin", "admin-password-1", ip="203.0.113.99").status_code == 302
    assert events("accounts.lockout_cleared")[0].actor_label == "manage.py unlock_login"


def test_site_administrators_unlock_in_the_admin(client, researcher, make_user):
    from axes.models import AccessAttempt

    for n in range(5):
        _attempt(client, "res", f"guess-{n}", ip="192.0.2.44")
    admin = make_user("siteadmin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    rows = list(AccessAttempt.objects.values_list("pk", flat=True))
    assert client.get("/admin/axes/accessattempt/").status_code == 200
    # Deleting the records in the admin, which would unlock unseen, is not offered.
    assert client.get(f"/admin/axes/accessattempt/{rows[0]}/delete/").status_code == 403
    answer = client.post("/admin/axes/accessattempt/", {"action": "unlock_addresses", "_selected_action": rows})
    assert answer.status_code == 302 and not AccessAttempt.objects.exists()
    assert events("accounts.lockout_cleared", ip_address="192.0.2.44")[0].actor_label == "siteadmin"


@pytest.mark.parametrize("counted_by", [["username", "ip_address"], ["username"]])
def test_another_users_sign_ins_from_the_address_do_not_reset_a_guessed_username(client, researcher, make_user,
                                                                                 study, settings, counted_by):
    """Twelve wrong passwords for ethics3, each followed by ``res`` signing in correctly from the same address:
    the fifth locks ethics3, and its right password is refused afterwards, from that address and any other."""
    settings.AXES_LOCKOUT_PARAMETERS = counted_by
    make_user("ethics3", study, ["ethics_officer"], password="ethics-password-3")
    guesses, others = [], []
    for n in range(12):
        guesses.append(_attempt(client, "ethics3", f"guess-{n}").status_code)
        others.append(_attempt(client, "res", "right-password-1").status_code)
        client.logout()
    assert guesses == [200] * 4 + [429] * 8
    if counted_by == ["username"]:
        # Counted by username alone, the address stays open to the researcher the whole time.
        assert others == [302] * 12
    else:
        # Counted by address too, the fifth failure from the address also closes it, whoever signs in.
        assert others == [302] * 4 + [429] * 8
    assert _attempt(client, "ethics3", "ethics-password-3").status_code == 429
    assert _attempt(client, "ethics3", "ethics-password-3", ip="198.51.100.200").status_code == 429
    [locked] = events("accounts.locked_out")
    assert locked.target_label == "ethics3" and locked.after["failures"] == 5


def test_a_success_clears_only_its_own_usernames_failures(client, researcher, make_user, study):
    make_user("ethics3", study, ["ethics_officer"], password="ethics-password-3")
    for n in range(4):
        _attempt(client, "ethics3", f"guess-{n}")
    for n in range(2):
        _attempt(client, "res", f"guess-{n}", ip="192.0.2.11")
    assert _attempt(client, "res", "right-password-1").status_code == 302
    client.logout()
    from axes.models import AccessAttempt

    assert sorted(AccessAttempt.objects.values_list("username", "failures_since_start")) == [("ethics3", 4)]
    # ethics3's owner signing in clears ethics3's count; the next four wrong passwords do not lock it.
    assert _attempt(client, "ethics3", "ethics-password-3", ip="192.0.2.12").status_code == 302
    client.logout()
    assert not AccessAttempt.objects.exists()
