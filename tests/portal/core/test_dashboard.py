import pytest
from django.core.management import call_command


def test_demo_setup_is_idempotent_and_prints_logins(db, capsys):
    call_command("demo_setup")
    call_command("demo_setup")
    out = capsys.readouterr().out
    for username in ("coordinator", "ethics1", "ethics2", "researcher", "admin"):
        assert f"{username} " in out
        assert f"ceres-demo-{username}" in out


@pytest.mark.parametrize("username, panel", [
    ("coordinator", "coordinator"), ("ethics1", "ethics_officer"), ("researcher", "researcher"),
])
def test_each_role_sees_its_panel(client, demo, username, panel):
    signed_in = client.post("/accounts/login/", {"username": username, "password": f"ceres-demo-{username}"})
    assert signed_in.status_code == 302
    page = client.get("/").content.decode()
    assert f'data-role="{panel}"' in page
    assert demo.title in page


def test_user_without_roles_sees_an_honest_empty_state(client, make_user):
    client.force_login(make_user("newcomer"))
    assert "You have no role in any study yet" in client.get("/").content.decode()
