from datetime import timedelta

import pytest
from django.utils import timezone

from portal.access.permissions import active_roles


@pytest.fixture
def study(make_study):
    return make_study("alpha")


def _overview(client, study):
    return client.get(f"/studies/{study.code}/")


def test_anonymous_is_sent_to_login(client, study):
    response = _overview(client, study)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_user_without_grant_gets_403_and_no_data(client, make_user, study):
    client.force_login(make_user("outsider"))
    response = _overview(client, study)
    assert response.status_code == 403
    assert study.title.encode() not in response.content


def test_user_with_grant_in_another_study_gets_403(client, make_user, make_study, study):
    other = make_study("beta")
    client.force_login(make_user("neighbour", other, ["coordinator"]))
    assert _overview(client, study).status_code == 403


def test_expired_grant_gets_403(client, make_user, study):
    user = make_user("lapsed", study, ["researcher"], expires_at=timezone.now() - timedelta(minutes=1))
    client.force_login(user)
    assert active_roles(user, study) == frozenset()
    assert _overview(client, study).status_code == 403


def test_unexpired_grant_gets_the_page(client, make_user, study):
    user = make_user("current", study, ["researcher"], expires_at=timezone.now() + timedelta(days=1))
    client.force_login(user)
    response = _overview(client, study)
    assert response.status_code == 200
    assert study.title in response.content.decode()


def test_dashboard_lists_only_granted_studies(client, make_user, make_study, study):
    make_study("beta", title="Hidden study")
    client.force_login(make_user("coord", study, ["coordinator"]))
    page = client.get("/").content.decode()
    assert study.title in page
    assert "Hidden study" not in page
