"""API tokens: hashed at rest, shown once, expiring, optionally limited to one study, revocable, audited."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts import services
from portal.accounts.models import ApiToken
from tests.portal.accounts.conftest import events


@pytest.fixture
def two_studies(make_study, make_user):
    alpha, beta = make_study("alpha"), make_study("beta")
    user = make_user("coord", alpha, ["coordinator"])
    from portal.access.services import grant_role

    grant_role("test", user, beta, "coordinator")
    return user, alpha, beta


def _api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_the_key_is_shown_once_and_only_its_hash_is_stored(client, two_studies):
    user, _, _ = two_studies
    client.force_login(user)
    made = client.post("/accounts/", {"name": "export script", "study": "", "days": 90})
    assert made.status_code == 200
    key = re.search(rb'id="new-key-value" class="mono" value="([^"]+)"', made.content).group(1).decode()
    assert "no-store" in made["Cache-Control"]
    token = ApiToken.objects.get()
    assert token.prefix == key[:8] and key not in token.key_hash
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM accounts_apitoken")
        assert key not in repr(cursor.fetchall()), "the key is stored in the database"
    listing = client.get("/accounts/").content.decode()
    assert key not in listing and f"{key[:8]}…" in listing
    assert timedelta(days=89, hours=23) < token.expires_at - timezone.now() <= timedelta(days=90)
    assert _api(key).get("/api/studies/").status_code == 200
    [event] = events("accounts.token_created")
    assert event.actor_label == "coord" and event.after["prefix"] == key[:8] and key not in str(event.after)


def test_an_expired_token_is_refused_with_a_reason(two_studies):
    user, _, _ = two_studies
    token, key = services.issue_token(user, name="old", days=1)
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    # 403, not 401: the API's first authentication is the session's, which sends no WWW-Authenticate challenge.
    answer = _api(key).get("/api/studies/")
    assert answer.status_code == 403 and "expired" in answer.json()["detail"]
    assert _api("not-a-key").get("/api/studies/").json()["detail"] == "invalid token"


def test_a_token_limited_to_a_study_opens_that_study_only(two_studies):
    user, alpha, _ = two_studies
    _, key = services.issue_token(user, name="alpha only", study=alpha)
    api = _api(key)
    assert [s["code"] for s in api.get("/api/studies/").json()["results"]] == ["alpha"]
    assert api.get("/api/studies/alpha/headsets/").status_code == 200
    refused = api.get("/api/studies/beta/headsets/")
    assert refused.status_code == 403 and "limited to another study" in refused.json()["detail"]
    assert api.get("/api/studies/beta/").status_code == 404
    _, everywhere = services.issue_token(user, name="all")
    assert _api(everywhere).get("/api/studies/beta/headsets/").status_code == 200


def test_a_token_cannot_open_a_study_its_owner_has_no_role_in(two_studies, make_study):
    user, _, _ = two_studies
    with pytest.raises(services.AccountError, match="no role in study gamma"):
        services.issue_token(user, name="x", study=make_study("gamma"))


@pytest.mark.parametrize("fields, message", [
    ({"name": " "}, "name the token"),
    ({"name": "x", "days": 91}, "1 to 90 days"),
    ({"name": "x", "days": 0}, "1 to 90 days"),
])
def test_bad_token_requests_are_named(two_studies, fields, message):
    with pytest.raises(services.AccountError, match=message):
        services.issue_token(two_studies[0], **fields)


def test_users_revoke_their_own_tokens_on_the_page(client, two_studies, make_user):
    user, _, _ = two_studies
    token, key = services.issue_token(user, name="laptop")
    other = make_user("other")
    client.force_login(other)
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404
    client.force_login(user)
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 302
    assert not ApiToken.objects.exists()
    assert _api(key).get("/api/studies/").json()["detail"] == "invalid token"
    [event] = events("accounts.token_revoked")
    assert event.actor_label == "coord" and event.before["name"] == "laptop"


def test_the_tokens_api_lists_makes_and_revokes_but_a_token_cannot_make_list_or_revoke_tokens(two_studies):
    user, _, _ = two_studies
    session = APIClient()
    session.force_login(user)
    made = session.post("/api/tokens/", {"name": "ci", "study": "alpha", "days": 7}, format="json")
    assert made.status_code == 201 and made.json()["study"] == "alpha"
    key = made.json()["key"]
    listed = session.get("/api/tokens/").json()["results"]
    assert [t["prefix"] for t in listed] == [key[:8]] and "key" not in listed[0]
    by_token = _api(key).post("/api/tokens/", {"name": "more"}, format="json")
    assert by_token.status_code == 403 and "cannot list, make or revoke tokens" in by_token.json()["detail"]
    assert _api(key).get("/api/tokens/").status_code == 403
    assert _api(key).delete(f"/api/tokens/{made.json()['id']}/").status_code == 403
    assert session.post("/api/tokens/", {"name": "x", "study": "nope"}, format="json").status_code == 400
    assert session.delete(f"/api/tokens/{made.json()['id']}/").status_code == 204
    assert not ApiToken.objects.exists()


def test_making_tokens_is_throttled_and_capped(two_studies, settings):
    cache.clear()
    user, _, _ = two_studies
    session = APIClient()
    session.force_login(user)
    rate = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["token-create"].split("/")[0])
    answers = [session.post("/api/tokens/", {"name": f"t{n}", "days": 1}, format="json").status_code
               for n in range(rate + 1)]
    cache.clear()
    assert answers[-1] == 429
    # Below the rate, the cap of unexpired tokens per user answers first.
    assert answers[:settings.CERES_TOKENS_PER_USER] == [201] * settings.CERES_TOKENS_PER_USER
    assert set(answers[settings.CERES_TOKENS_PER_USER:rate]) <= {400}
    assert ApiToken.objects.count() == settings.CERES_TOKENS_PER_USER


def test_the_admin_shows_no_key_and_revokes_through_the_service(client, two_studies, make_user):
    user, _, _ = two_studies
    token, key = services.issue_token(user, name="laptop")
    admin = make_user("siteadmin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    page = client.get(f"/admin/accounts/apitoken/{token.pk}/change/").content.decode()
    assert key not in page and token.key_hash not in page
    answer = client.post("/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [token.pk]})
    assert answer.status_code == 302 and not ApiToken.objects.exists()
    assert events("accounts.token_revoked")[0].actor_label == "siteadmin"


def test_keys_of_the_old_plain_text_table_are_carried_over_hashed(two_studies):
    """Migration accounts/0002: the old authtoken table's keys keep working, and the table is dropped."""
    if connection.vendor != "postgresql":
        pytest.skip("creates and drops a table inside the test's transaction: needs PostgreSQL")
    from importlib import import_module

    from django.apps import apps

    migration = import_module("portal.accounts.migrations.0002_hash_existing_api_keys")
    user, _, _ = two_studies
    key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamptz, user_id int)")
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, now(), %s)", [key, user.pk])
    with connection.schema_editor() as editor:
        migration.hash_existing_keys(apps, editor)
    assert "authtoken_token" not in connection.introspection.table_names()
    token = ApiToken.objects.get(user=user)
    assert token.prefix == key[:8] and token.expires_at > timezone.now() + timedelta(days=89)
    assert _api(key).get("/api/studies/").status_code == 200
