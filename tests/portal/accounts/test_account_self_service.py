"""People run their own accounts through the pages: an email address confirmed by a link before mail goes to it,
a password change and a reset by email (throttled, audited, under the login lockout's rules), and recovery codes
for a lost authenticator. Mail goes through Django's mail backend (captured here in ``mail.outbox``)."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.core import mail
from django.core.cache import cache
from django.urls import reverse
from django_otp.oath import totp
from django_otp.plugins.otp_static.models import StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts import services
from portal.audit.models import AuditEvent
from tests.portal.accounts.conftest import events

LOGIN = "/accounts/login/"
IP = "192.0.2.44"


@pytest.fixture(autouse=True)
def _empty_throttles():
    cache.clear()  # the reset and confirmation counters live in the cache, which outlives a test's database
    yield
    cache.clear()


def _sign_in(client, username: str, password: str, ip: str = IP):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=ip, follow=True)


def _link(message, path_start: str) -> str:
    found = re.findall(r"https?://[^/\s]+(/\S+)", message.body)
    links = [link for link in found if link.startswith(path_start)]
    assert len(links) == 1, message.body
    return links[0]


def _no_secret_in_audit(*secrets: str) -> None:
    for event in AuditEvent.objects.all():
        text = f"{event.before} {event.after}"
        assert not any(secret in text for secret in secrets), f"{event.action} holds a secret: {text}"


# --- email address ----------------------------------------------------------------------------------------------


def test_mask_email():
    assert services.mask_email("alice@example.org") == "a…@example.org"
    assert services.mask_email("b@lab.example") == "b…@lab.example"
    assert services.mask_email("") == "" and services.mask_email(None) == ""


def test_an_address_receives_mail_only_after_its_owner_opens_the_link(client, make_user, study):
    alice = make_user("alice", study, ["coordinator"], password="alice-password-1")
    make_user("bob", study, ["coordinator"], password="bob-password-1")
    _sign_in(client, "alice", "alice-password-1")
    page = client.get(reverse("account"))
    assert b"No confirmed address" in page.content and b'id="email"' in page.content

    bad = client.post(reverse("email-change"), {"address": "not an address"}, follow=True)
    assert b"is not an email address" in bad.content and services.pending_email(alice) is None
    assert mail.outbox == []

    asked = client.post(reverse("email-change"), {"address": "Alice.Lab@Example.ORG"}, follow=True)
    assert b"A confirmation link was sent to Alice.Lab@example.org" in asked.content
    assert b"Waiting for confirmation: Alice.Lab@example.org" in asked.content
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["Alice.Lab@example.org"]
    alice.refresh_from_db()
    assert services.confirmed_email(alice) is None and alice.email == ""
    link = _link(mail.outbox[0], "/accounts/email/confirm/")

    # Opening the link changes nothing by itself; it shows a button.
    shown = client.get(link)
    assert shown.status_code == 200 and b"Confirm this address" in shown.content
    alice.refresh_from_db()
    assert services.confirmed_email(alice) is None

    # Someone else signed in (say, the owner of an address Alice mistyped) cannot confirm it for her.
    client.post(reverse("logout"))
    _sign_in(client, "bob", "bob-password-1")
    stranger = client.post(link, follow=True)
    assert b"made for another account" in stranger.content
    alice.refresh_from_db()
    assert alice.email == "" and services.pending_email(alice) == "Alice.Lab@example.org"

    client.post(reverse("logout"))
    _sign_in(client, "alice", "alice-password-1")
    done = client.post(link, follow=True)
    assert b"Alice.Lab@example.org is confirmed" in done.content
    alice.refresh_from_db()
    assert services.confirmed_email(alice) == "Alice.Lab@example.org" and services.pending_email(alice) is None
    # A link works once.
    again = client.post(link, follow=True)
    assert b"was used already" in again.content

    # A link for an address replaced since does not confirm the older one.
    client.post(reverse("email-change"), {"address": "first@example.net"})
    first = _link(mail.outbox[-1], "/accounts/email/confirm/")
    client.post(reverse("email-change"), {"address": "second@example.net"})
    stale = client.post(first, follow=True)
    assert b"was used already or its address was replaced" in stale.content
    alice.refresh_from_db()
    assert alice.email == "Alice.Lab@example.org"
    forged = client.post(first[:-3] + "xyz/", follow=True)
    assert b"not valid" in forged.content

    # Another account's confirmed address cannot be claimed.
    client.post(reverse("logout"))
    _sign_in(client, "bob", "bob-password-1")
    taken = client.post(reverse("email-change"), {"address": "alice.lab@example.org"}, follow=True)
    assert b"the confirmed address of another account" in taken.content

    requested = events("accounts.email_change_requested")
    assert [e.after["address"] for e in requested] == ["A…@example.org", "f…@example.net", "s…@example.net"]
    confirmed = events("accounts.email_confirmed")
    assert len(confirmed) == 1 and confirmed[0].target_label == "alice" and confirmed[0].after["address"] == \
        "A…@example.org"
    _no_secret_in_audit("Alice.Lab", "first@", "second@")

    # Removing it stops mail at once.
    client.post(reverse("logout"))
    _sign_in(client, "alice", "alice-password-1")
    client.post(reverse("email-remove"))
    alice.refresh_from_db()
    assert services.confirmed_email(alice) is None and services.pending_email(alice) is None
    assert len(events("accounts.email_removed")) == 1


def test_confirmation_links_are_limited_per_hour(client, make_user, settings):
    settings.CERES_EMAIL_CONFIRMATIONS_PER_HOUR = 2
    make_user("carol", password="carol-password-1")
    _sign_in(client, "carol", "carol-password-1")
    for n in range(2):
        client.post(reverse("email-change"), {"address": f"c{n}@example.org"})
    refused = client.post(reverse("email-change"), {"address": "c9@example.org"}, follow=True)
    assert b"at most 2 confirmation links an hour" in refused.content
    assert [m.to for m in mail.outbox] == [["c0@example.org"], ["c1@example.org"]]


def test_a_mail_server_that_refuses_leaves_nothing_half_written(client, make_user, settings):
    # A real SMTP connection to a port where nothing listens on this machine: refused at once.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS, settings.EMAIL_TIMEOUT = (
        "127.0.0.1", free_port, False, 5)
    ivy = make_user("ivy", password="ivy-password-1")
    _sign_in(client, "ivy", "ivy-password-1")
    refused = client.post(reverse("email-change"), {"address": "ivy@example.org"}, follow=True)
    assert b"the mail server did not take the message; nothing was changed" in refused.content
    assert services.pending_email(ivy) is None and events("accounts.email_change_requested") == []


# --- password change --------------------------------------------------------------------------------------------


def test_password_change_is_audited_and_a_wrong_current_password_counts_toward_the_lockout(client, make_user, study,
                                                                                          settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    dana = make_user("dana", study, ["researcher"], password="dana-password-1")
    dana.email = "dana@example.org"
    dana.save()
    _sign_in(client, "dana", "dana-password-1")
    form = client.get(reverse("password-change"))
    assert form.status_code == 200 and b"Change your password" in form.content

    changed = client.post(reverse("password-change"), {"old_password": "dana-password-1",
                                                       "new_password1": "a-new-long-secret-7",
                                                       "new_password2": "a-new-long-secret-7"}, REMOTE_ADDR=IP)
    assert changed.status_code == 302 and changed["Location"] == reverse("account")
    assert client.get(reverse("account")).status_code == 200  # this session stays signed in
    [event] = events("accounts.password_changed")
    assert event.target_label == "dana" and event.actor_label == "dana"
    assert [m.to for m in mail.outbox] == [["dana@example.org"]] and "password was changed" in mail.outbox[0].subject
    client.post(reverse("logout"))
    assert _sign_in(client, "dana", "dana-password-1").request["PATH_INFO"] == LOGIN
    assert _sign_in(client, "dana", "a-new-long-secret-7").request["PATH_INFO"] == "/"

    # A session left open: guessing the current password on the change form locks the account like sign-in does.
    answers = [client.post(reverse("password-change"), {"old_password": f"guess-{n}", "new_password1": "x-y-z-1234567",
                                                        "new_password2": "x-y-z-1234567"}, REMOTE_ADDR=IP).status_code
               for n in range(5)]
    assert answers == [400] * 4 + [429]
    assert client.get(reverse("account")).status_code == 302  # signed out
    failed = events("accounts.login_failed")
    assert len(failed) == 6 and {e.target_label for e in failed} == {"dana"}  # the old password at sign-in, and 5 here
    assert len(events("accounts.locked_out")) == 1
    refused = _sign_in(client, "dana", "a-new-long-secret-7")
    assert refused.status_code == 429 and b"Sign-in refused for now" in refused.content
    dana.refresh_from_db()
    assert dana.check_password("a-new-long-secret-7")
    _no_secret_in_audit("a-new-long-secret", "guess-", "dana-password")


# --- password reset ---------------------------------------------------------------------------------------------


def test_password_reset_by_email_is_throttled_audited_and_does_not_lift_a_lockout(client, make_user, study,
                                                                                  settings):
    settings.CERES_PASSWORD_RESETS_PER_ADDRESS = 1
    settings.CERES_PASSWORD_RESETS_PER_CLIENT = 3
    erin = make_user("erin", study, ["researcher"], password="erin-password-1")
    coordinator = make_user("coord", study, ["coordinator"])
    services.set_confirmed_email("test", erin, "erin@example.org")
    assert b"Forgot your password?" in client.get(LOGIN).content

    # An address no account has: the same answer, no mail.
    unknown = client.post(reverse("password-reset"), {"email": "nobody@example.org"}, REMOTE_ADDR=IP)
    assert unknown.status_code == 302 and unknown["Location"] == reverse("password-reset-done")
    assert mail.outbox == []

    # Erin locks herself out, then asks for a reset.
    for n in range(5):
        client.post(LOGIN, {"username": "erin", "password": f"guess-{n}"}, REMOTE_ADDR="198.51.100.7")
    asked = client.post(reverse("password-reset"), {"email": "ERIN@example.org"}, REMOTE_ADDR=IP, follow=True)
    assert b"Check your mail" in asked.content
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["erin@example.org"]
    link = _link(mail.outbox[0], "/accounts/password/reset/")
    page = client.get(link, follow=True)
    assert b"Set a new password" in page.content
    set_url = page.redirect_chain[-1][0]
    done = client.post(set_url, {"new_password1": "erin-new-secret-42", "new_password2": "erin-new-secret-42"},
                       REMOTE_ADDR=IP, follow=True)
    assert b"Password set" in done.content
    erin.refresh_from_db()
    assert erin.check_password("erin-new-secret-42")
    assert "password was changed" in mail.outbox[-1].subject and mail.outbox[-1].to == ["erin@example.org"]
    # The link works once.
    assert b"This link does not work" in client.get(link, follow=True).content

    # The reset did not lift the lockout: the new password waits for the cool-off or a coordinator.
    refused = _sign_in(client, "erin", "erin-new-secret-42", ip="198.51.100.8")
    assert refused.status_code == 429
    services.unlock_in_study(coordinator, study, "erin")
    assert _sign_in(client, "erin", "erin-new-secret-42", ip="198.51.100.8").request["PATH_INFO"] == "/"
    client.post(reverse("logout"))

    # Throttled per address (1 an hour here) and per client (3 an hour here), whether or not an account has it.
    again = client.post(reverse("password-reset"), {"email": "erin@example.org"}, REMOTE_ADDR=IP)
    assert again.status_code == 429 and b"Too many reset requests" in again.content  # erin's second this hour
    other_client = client.post(reverse("password-reset"), {"email": "erin@example.org"}, REMOTE_ADDR="203.0.113.9")
    assert other_client.status_code == 429  # the address's limit holds from any client
    fresh = client.post(reverse("password-reset"), {"email": "someone@example.org"}, REMOTE_ADDR=IP)
    assert fresh.status_code == 429  # this client's fourth
    assert sum(1 for m in mail.outbox if "reset your password" in m.subject) == 1

    requested = events("accounts.password_reset_requested")
    assert [(e.target_label or None, e.after["address"], e.after.get("refused")) for e in requested] == [
        (None, "n…@example.org", None),
        ("erin", "e…@example.org", None),
        ("erin", "e…@example.org", "too many requests for this address"),
        ("erin", "e…@example.org", "too many requests for this address"),
        (None, "s…@example.org", "too many requests from this client"),
    ]
    [reset] = events("accounts.password_reset")
    assert reset.target_label == "erin" and reset.after == {"ip": IP}
    _no_secret_in_audit("erin-new-secret", "erin@example.org")


# --- recovery codes ---------------------------------------------------------------------------------------------


def _enrol(client, user, password: str) -> list[str]:
    _sign_in(client, user.username, password)
    client.get(reverse("second-factor"))
    device = TOTPDevice.objects.get(user=user, confirmed=False)
    shown = client.post(reverse("second-factor"), {"code": f"{totp(device.bin_key):06d}", "next": "/"})
    assert shown.status_code == 200 and b"shown this once" in shown.content
    codes = re.findall(r"<li>([a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4})</li>", shown.content.decode())
    return codes


def test_recovery_codes_are_shown_once_work_once_and_can_be_made_again(client, make_user, study, settings):
    settings.CERES_RECOVERY_CODES = 4
    fay = make_user("fay", study, ["coordinator"], password="fay-password-1")
    codes = _enrol(client, fay, "fay-password-1")
    assert len(codes) == 4 and len(set(codes)) == 4
    # Only a part of each code's hash is kept, never the code.
    stored = set(StaticToken.objects.filter(device__user=fay).values_list("token", flat=True))
    assert stored == {hashlib.sha256(c.replace("-", "").upper().encode()).hexdigest()[:16] for c in codes}
    assert not any(c in stored or c.replace("-", "") in stored for c in codes)
    account = client.get(reverse("account"))
    assert b"4 unused recovery codes" in account.content and codes[0].encode() not in account.content
    client.post(reverse("logout"))

    # A recovery code passes the second factor in place of the authenticator, once.
    _sign_in(client, "fay", "fay-password-1")
    assert client.get(reverse("account")).status_code == 302
    used = client.post(reverse("second-factor"), {"recovery_code": codes[1].upper(), "next": "/"}, REMOTE_ADDR=IP)
    assert used.status_code == 302 and used["Location"] == "/"
    assert client.get(reverse("account")).status_code == 200
    # ... but it is not a fresh second factor for approving a release.
    assert services.second_factor_passed_at(client.session) is None
    client.post(reverse("logout"))
    _sign_in(client, "fay", "fay-password-1")
    replay = client.post(reverse("second-factor"), {"recovery_code": codes[1], "next": "/"}, REMOTE_ADDR=IP)
    assert replay.status_code == 400 and b"wrong or already used recovery code" in replay.content
    # Wrong codes slow further tries down: even a good code waits after one.
    waiting = client.post(reverse("second-factor"), {"recovery_code": codes[2]}, REMOTE_ADDR=IP)
    assert waiting.status_code == 400 and b"too many wrong codes" in waiting.content
    assert client.get(reverse("account")).status_code == 302

    # Made again from the account page (after passing the authenticator): the old set stops working.
    fay_device = TOTPDevice.objects.get(user=fay, confirmed=True)
    fay_device.throttle_reset()
    passed = client.post(reverse("second-factor"), {"code": f"{totp(fay_device.bin_key, drift=1):06d}"})
    assert passed.status_code == 302
    again = client.post(reverse("recovery-codes"))
    assert again.status_code == 200 and again["Cache-Control"] == "no-store"
    new_codes = re.findall(r"<li>([a-z2-7-]{19})</li>", again.content.decode())
    assert len(new_codes) == 4 and not set(new_codes) & set(codes)
    assert services.recovery_codes_left(fay) == 4
    with pytest.raises(services.AccountError, match="wrong or already used"):
        services.use_recovery_code(fay, codes[3])

    assert [e.after["count"] for e in events("accounts.recovery_codes_made")] == [4, 4]
    [use] = events("accounts.recovery_code_used")
    assert use.target_label == "fay" and use.after == {"ip": IP, "left": 3}
    assert [e.after["reason"] for e in events("accounts.recovery_code_refused")] == [
        "wrong or already used recovery code", "too many wrong codes; wait and try again",
        "wrong or already used recovery code"]
    _no_secret_in_audit(*codes, *new_codes)


def test_recovery_codes_need_an_authenticator_and_go_with_it(make_user, study):
    gus = make_user("gus", study, ["coordinator"])
    with pytest.raises(services.AccountError, match="set up an authenticator app first"):
        services.make_recovery_codes(gus)
    services.provision_second_factor("test", gus)
    codes = services.make_recovery_codes(gus)
    services.remove_second_factor(gus, gus)
    assert services.recovery_codes_left(gus) is None
    with pytest.raises(services.AccountError, match="no recovery codes"):
        services.use_recovery_code(gus, codes[0])
    # No admin page writes codes past the audit trail (django-otp's own editable one is taken away).
    from django.contrib import admin
    from django_otp.plugins.otp_static.models import StaticDevice

    assert StaticDevice not in admin.site._registry


# --- the header before the second factor ------------------------------------------------------------------------


def test_the_header_shows_no_study_before_the_second_factor(client, make_user, study):
    hal = make_user("hal", study, ["ethics_officer"], password="hal-password-1")
    device = services.provision_second_factor("test", hal)
    page = _sign_in(client, "hal", "hal-password-1")
    assert page.request["PATH_INFO"] == reverse("second-factor")
    header = page.content.decode().split("</header>")[0]
    assert "second factor to pass" in header and "Sign out" in header
    for absent in ("alpha", "Dashboard</a>", f'href="{reverse("account")}"', "Data access", 'aria-label="Studies"'):
        assert absent not in header, absent
    passed = client.post(reverse("second-factor"), {"code": f"{totp(device.bin_key):06d}"}, follow=True)
    header = passed.content.decode().split("</header>")[0]
    assert 'aria-label="Studies"' in header and reverse("study-overview", args=[study.code]) in header
    assert f'href="{reverse("account")}"' in header
