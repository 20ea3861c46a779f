"""Every API endpoint, walked with a narrow token: a study-limited token sees and changes only its study, and no
token lists, makes or revokes tokens.

The walk takes each ``/api/`` URL pattern of the configuration (``tests/portal/urlwalk.py``) and each method its
view answers: a pattern added later is walked too, and one outside a study's URL must be named here with what a
study-limited token gets from it.
"""

from __future__ import annotations

import pytest
from django.urls import resolve
from rest_framework.test import APIClient

from portal.accounts import services
from portal.accounts.models import ApiToken
from portal.research.models import AccessRequest
from portal.research.services import access
from portal.studies.services.study import publish_data_use_agreement
from tests.portal.urlwalk import all_routes, url_of

METHODS = ("get", "post", "put", "patch", "delete")


def api_routes():
    return [route for route in all_routes() if route.route.startswith("api/")]


def methods_of(url: str) -> list[str]:
    """The HTTP methods the URL's view answers (a view set's by its route's actions)."""
    view = resolve(url).func
    actions = getattr(view, "actions", None)
    if actions:
        return sorted(actions)
    cls = getattr(view, "cls", None) or getattr(view, "view_class", None)
    return [method for method in METHODS if hasattr(cls, method)]


def _api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def world(make_study, make_user):
    """``multi`` coordinates alpha and beta and has asked both for researcher access; an alpha-only token and an
    unlimited one."""
    alpha, beta = make_study("alpha"), make_study("beta")
    user = make_user("multi", alpha, ["coordinator"])
    from portal.access.services import grant_role

    grant_role("test", user, beta, "coordinator")
    pending = {}
    for study in (alpha, beta):
        agreement = publish_data_use_agreement(user, study, text=f"Use {study.code} data for research only.")
        pending[study.code] = access.request_access(user, study, purpose="grasp policy", version=agreement.version,
                                                    sha256=agreement.sha256)
    alpha_token, alpha_key = services.issue_token(user, name="alpha only", study=alpha)
    beta_token, _ = services.issue_token(user, name="beta only", study=beta)
    everywhere, _ = services.issue_token(user, name="all")
    return {"user": user, "alpha": alpha, "beta": beta, "pending": pending, "key": alpha_key,
            "tokens": [alpha_token, beta_token, everywhere]}


LIMITED = "limited to another study than beta"
NO_TOKENS = "an API token cannot list, make or revoke tokens"


def _outside_a_study(route_key: str, method: str, world) -> tuple[int, object, dict]:
    """What an alpha-only token gets from an endpoint outside a study's URL: its status, what to check in the
    answer (text of the reason, or a test of the body) and the URL's arguments (the other study's objects)."""
    beta_request, alpha_request = world["pending"]["beta"], world["pending"]["alpha"]
    beta_token = world["tokens"][1]
    return {
        # Nothing of any study: the API's index, its schema and the schema's page.
        ("api-root", "get"): (200, None, {}),
        ("api-schema", "get"): (200, None, {}),
        ("api-docs", "get"): (200, None, {}),
        ("api-study-list", "get"): (200, lambda body: [s["code"] for s in body["results"]] == ["alpha"], {}),
        ("api-study-detail", "get"): (404, None, {"code": "beta"}),
        ("api-token-list", "get"): (403, NO_TOKENS, {}),
        ("api-token-list", "post"): (403, NO_TOKENS, {}),
        ("api-token-detail", "delete"): (403, NO_TOKENS, {"pk": beta_token.pk}),
        ("api-my-access-request-list", "get"): (
            200, lambda body: [r["uid"] for r in body["results"]] == [str(alpha_request.uid)], {}),
        ("api-my-access-request-list", "post"): (403, LIMITED, {}),
        ("api-my-access-request-cancel", "post"): (404, None, {"uid": beta_request.uid}),
    }[(route_key, method)]


def test_a_study_limited_token_reaches_nothing_of_another_study_on_any_endpoint(world):
    api = _api(world["key"])
    outside = set()
    walked = 0
    for route in api_routes():
        in_study = "study_code" in route.arguments
        for method in methods_of(url_of(route, {name: 1 for name in route.arguments})):
            if in_study:
                expected, check, values = 403, LIMITED, {"study_code": "beta"}
            else:
                outside.add(route.key)
                expected, check, values = _outside_a_study(route.key, method, world)
            url = url_of(route, {**{name: 1 for name in route.arguments}, **values})
            body = {"study": "beta", "name": "x", "purpose": "x", "agreement_version": 1,
                    "agreement_sha256": world["pending"]["beta"].acceptance.sha256}
            answer = getattr(api, method)(url, body, format="json") if method != "get" else api.get(url)
            assert answer.status_code == expected, f"{method.upper()} {url}: {answer.status_code}"
            if isinstance(check, str):
                assert check in answer.json()["detail"], f"{method.upper()} {url}: {answer.json()}"
            elif callable(check):
                assert check(answer.json()), f"{method.upper()} {url}: {answer.json()}"
            walked += 1
    assert walked > 60
    # Every endpoint outside a study's URL is named above with what the token gets there.
    assert outside == {"api-root", "api-schema", "api-docs", "api-study-list", "api-study-detail", "api-token-list",
                       "api-token-detail", "api-my-access-request-list", "api-my-access-request-cancel"}
    # Nothing changed: every token is there, the other study's request still waits.
    assert ApiToken.objects.count() == 3
    assert AccessRequest.objects.get(pk=world["pending"]["beta"].pk).state == AccessRequest.State.PENDING
    assert AccessRequest.objects.filter(study=world["beta"]).count() == 1


def test_the_limited_token_still_works_in_its_own_study(world):
    api = _api(world["key"])
    assert api.get("/api/studies/alpha/headsets/").status_code == 200
    alpha_request = world["pending"]["alpha"]
    cancelled = api.post(f"/api/access-requests/{alpha_request.uid}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"


def test_a_signed_in_session_lists_and_revokes_tokens(world):
    session = APIClient()
    session.force_login(world["user"])
    listed = session.get("/api/tokens/").json()["results"]
    assert sorted(t["name"] for t in listed) == ["all", "alpha only", "beta only"]
    assert session.delete(f"/api/tokens/{world['tokens'][1].pk}/").status_code == 204
    assert ApiToken.objects.count() == 2
