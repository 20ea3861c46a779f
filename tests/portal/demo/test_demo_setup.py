"""manage.py demo_setup: a demo study with one user per role, set up again without harm."""

from django.core.management import call_command


def test_demo_setup_is_idempotent_and_prints_logins(db, capsys):
    call_command("demo_setup")
    call_command("demo_setup")
    out = capsys.readouterr().out
    for username in ("coordinator", "ethics1", "ethics2", "researcher", "admin"):
        assert f"{username} " in out
        assert f"ceres-demo-{username}" in out
    # Each demo account has a confirmed address on a domain that never resolves (the demo prints its mail).
    from django.contrib.auth import get_user_model

    from portal.accounts.services import confirmed_email
    for user in get_user_model().objects.all():
        assert confirmed_email(user) == f"{user.username}@demo.ceres.invalid"
    # The addresses come before anyone is told anything: the officers' message about the researcher's request is
    # not marked "no email address".
    from portal.notifications.models import Email, Notification
    told = Notification.objects.filter(recipient__username__in=("ethics1", "ethics2"))
    assert told.exists() and not told.filter(email=Email.NO_ADDRESS).exists()
    # One changed on the account page stays when the demo is set up again.
    get_user_model().objects.filter(username="researcher").update(email="r.lab@example.org")
    call_command("demo_setup")
    assert get_user_model().objects.get(username="researcher").email == "r.lab@example.org"
