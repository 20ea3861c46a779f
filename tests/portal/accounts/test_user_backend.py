"""The portal's password backend (``accounts.backends``): Django's ``ModelBackend`` reading the session's user with a
query compiled once. It reads what Django's reads, and a deactivated user, a changed password and a revoked role
show on the very next request (nothing is kept across requests); sessions signed in with Django's backend before
the change stay signed in."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, backends, get_user_model
from django.urls import reverse

from portal.access.models import RoleGrant
from portal.accounts.backends import DJANGO_MODEL_BACKEND, MODEL_BACKEND, ModelBackend

pytestmark = pytest.mark.django_db


def _fields(user) -> list:
    return [getattr(user, field.attname) for field in get_user_model()._meta.concrete_fields]


def test_it_reads_the_user_django_reads(make_user, study):
    user = make_user("reader", study, ["coordinator"])
    make_user("someone-else")
    read = ModelBackend().get_user(user.pk)
    expected = backends.ModelBackend().get_user(user.pk)
    assert read == expected and _fields(read) == _fields(expected)
    assert read.get_deferred_fields() == set() and read._state.db == expected._state.db and not read._state.adding
    assert ModelBackend().get_user(user.pk + 1000) is None
    user.is_active = False
    user.save()
    assert ModelBackend().get_user(user.pk) is None and backends.ModelBackend().get_user(user.pk) is None
    assert settings.AUTHENTICATION_BACKENDS[-1] == MODEL_BACKEND


def _signed_in_page(client, make_user, study, name):
    user = make_user(name, study, ["coordinator"])
    client.force_login(user)
    page = reverse("recording-list", args=[study.code])
    assert client.get(page).status_code == 200
    assert client.session[BACKEND_SESSION_KEY] == MODEL_BACKEND
    return user, page


def test_a_deactivated_user_is_signed_out_on_the_next_request(client, make_user, study):
    user, page = _signed_in_page(client, make_user, study, "deactivated")
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    response = client.get(page)
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_a_changed_password_signs_the_session_out_on_the_next_request(client, make_user, study):
    user, page = _signed_in_page(client, make_user, study, "changed")
    user.set_password("another-password-entirely")
    user.save()
    response = client.get(page)
    assert response.status_code == 302 and response.url.startswith(reverse("login"))
    assert client.get(page).status_code == 302  # flushed: still signed out


def test_a_revoked_role_is_refused_on_the_next_request(client, make_user, study):
    user, page = _signed_in_page(client, make_user, study, "revoked-role")
    RoleGrant.objects.filter(user=user).delete()
    assert client.get(page).status_code == 403


def test_a_session_signed_in_with_djangos_backend_stays_signed_in(client, make_user, study):
    user = make_user("before-the-change", study, ["coordinator"])
    client.force_login(user)
    session = client.session
    session[BACKEND_SESSION_KEY] = DJANGO_MODEL_BACKEND
    session.save()
    page = reverse("recording-list", args=[study.code])
    assert client.get(page).status_code == 200
    user.set_password("another-password-entirely")  # and its guarantees hold as for any session
    user.save()
    assert client.get(page).status_code == 302
