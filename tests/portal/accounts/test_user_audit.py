"""Every change of who can do what, made through the admin, is one audit event naming the administrator."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from portal.audit.models import AuditEvent
from portal.audit.services import verify_chain

User = get_user_model()


@pytest.fixture
def admin_client(client, make_user):
    admin = make_user("siteadmin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    return client


def _form(user, **changes) -> dict:
    """The admin's change form for ``user`` as posted, with ``changes`` applied."""
    state = {
        "username": user.username, "first_name": "", "last_name": "", "email": "",
        "is_active": user.is_active, "is_staff": user.is_staff, "is_superuser": user.is_superuser,
        "groups": [g.pk for g in user.groups.all()], "user_permissions": [p.pk for p in user.user_permissions.all()],
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"), "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        **changes,
    }
    return {key: value for key, value in state.items() if value is not False}


def _new_events(since: int) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(seq__gt=since).order_by("seq"))


def _last_seq() -> int:
    last = AuditEvent.objects.order_by("-seq").first()
    return last.seq if last else 0


def test_each_user_change_in_the_admin_is_one_audit_event(admin_client, db):
    reviewers = Group.objects.create(name="reviewers")
    add_grant = Permission.objects.get(codename="add_rolegrant")

    seq = _last_seq()
    password = "a-long-password-1"
    created = admin_client.post("/admin/auth/user/add/", {
        "username": "bob", "usable_password": "true", "password1": password, "password2": password,
    })
    assert created.status_code == 302, created.content
    [event] = _new_events(seq)
    assert (event.action, event.actor_label, event.target_label) == ("accounts.user_created", "siteadmin", "bob")
    assert event.after == {"username": "bob", "is_active": True, "is_staff": False, "is_superuser": False}
    bob = User.objects.get(username="bob")
    change = f"/admin/auth/user/{bob.pk}/change/"

    steps = [
        ({"is_staff": True}, "accounts.user_changed", {"is_staff": False}, {"is_staff": True}),
        ({"is_superuser": True}, "accounts.user_changed", {"is_superuser": False}, {"is_superuser": True}),
        ({"is_superuser": False}, "accounts.user_changed", {"is_superuser": True}, {"is_superuser": False}),
        ({"is_active": False}, "accounts.user_changed", {"is_active": True}, {"is_active": False}),
        ({"username": "robert"}, "accounts.user_changed", {"username": "bob"}, {"username": "robert"}),
        ({"groups": [reviewers.pk]}, "accounts.groups_changed", None, {"added": ["reviewers"]}),
        ({"groups": []}, "accounts.groups_changed", None, {"removed": ["reviewers"]}),
        ({"user_permissions": [add_grant.pk]}, "accounts.user_permissions_changed", None,
         {"added": ["access.add_rolegrant"]}),
        ({"user_permissions": []}, "accounts.user_permissions_changed", None, {"removed": ["access.add_rolegrant"]}),
    ]
    for changes, action, before, after in steps:
        bob.refresh_from_db()
        seq = _last_seq()
        answer = admin_client.post(change, _form(bob, **changes))
        assert answer.status_code == 302, (changes, answer.content[:2000])
        events = _new_events(seq)
        assert [(e.action, e.before, e.after) for e in events] == [(action, before, after)], changes
        assert events[0].actor_label == "siteadmin" and events[0].target_id == str(bob.pk)

    bob.refresh_from_db()
    seq = _last_seq()
    assert admin_client.post(change, _form(bob)).status_code == 302
    assert _new_events(seq) == [], "saving without a change is no event"

    answer = admin_client.post(f"/admin/auth/user/{bob.pk}/password/", {
        "usable_password": "true", "password1": "another-long-password-2", "password2": "another-long-password-2"})
    assert answer.status_code == 302
    [event] = _new_events(seq)
    assert event.action == "accounts.password_changed" and event.after is None and event.before is None

    seq = _last_seq()
    permissions = admin_client.post(f"/admin/auth/group/{reviewers.pk}/change/",
                                    {"name": "reviewers", "permissions": [add_grant.pk]})
    assert permissions.status_code == 302
    [event] = _new_events(seq)
    assert (event.action, event.target_label, event.after) == (
        "accounts.group_permissions_changed", "reviewers", {"added": ["access.add_rolegrant"]})

    seq = _last_seq()
    assert admin_client.post(f"/admin/auth/user/{bob.pk}/delete/", {"post": "yes"}).status_code == 302
    [event] = _new_events(seq)
    assert (event.action, event.target_label) == ("accounts.user_deleted", "robert")
    assert verify_chain()[1] is None


def test_changes_outside_a_request_are_recorded_as_the_system(make_user):
    user = make_user("carol")
    user.is_superuser = True
    user.save()
    event = AuditEvent.objects.filter(action="accounts.user_changed").get()
    assert event.actor_label == "system" and event.after == {"is_superuser": True}


def test_a_login_is_not_a_user_change(client, make_user):
    make_user("dave", password="dave-password-1")
    assert client.post("/accounts/login/", {"username": "dave", "password": "dave-password-1"}).status_code == 302
    assert not AuditEvent.objects.filter(action__in=["accounts.user_changed", "accounts.password_changed"]).exists()
    assert AuditEvent.objects.filter(action="accounts.login", target_label="dave").count() == 1
    client.post("/accounts/logout/")
    assert AuditEvent.objects.filter(action="accounts.logout", target_label="dave").count() == 1
