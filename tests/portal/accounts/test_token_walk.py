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
    """The HTTP methods the URL's view answers (a view set's by its route's actions); HEAD is GET's twin."""
    view = resolve(url).func
    actions = getattr(view, "actions", None)
    if actions:
        return sorted(method for method in actions if method in METHODS)
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


NO_SECOND_FACTOR = "was made without a second factor, which this account now needs"


def _walk_refused(key: str, reason: str) -> int:
    """Every method of every /api/ URL pattern (in study alpha) answers 403 with ``reason``; how many were walked."""
    api = _api(key)
    walked = 0
    for route in api_routes():
        url = url_of(route, {name: "alpha" if name in ("study_code", "code") else 1 for name in route.arguments})
        for method in methods_of(url):
            answer = getattr(api, method)(url, {}, format="json") if method != "get" else api.get(url)
            assert answer.status_code == 403, f"{method.upper()} {url}: {answer.status_code}"
            if answer["Content-Type"].startswith("application/json"):  # (the schema's HTML page: status only)
                assert reason in answer.json()["detail"], f"{method.upper()} {url}: {answer.json()}"
            walked += 1
    return walked


def _code(device) -> str:
    from django_otp.oath import totp

    return f"{totp(device.bin_key):06d}"


def test_a_token_made_without_a_second_factor_is_refused_everywhere_once_its_user_needs_one(settings, make_study,
                                                                                             make_user):
    from django.urls import reverse
    from django_otp.plugins.otp_totp.models import TOTPDevice

    from portal.access.services import grant_role

    alpha = make_study("alpha")
    officer = make_user("ethics3", alpha, ["ethics_officer"], password="ethics-password-3")
    _, before_switch = services.issue_token(officer, name="made before CERES_REQUIRE_2FA was on")
    promoted = make_user("res", alpha, ["researcher"])
    _, before_grant = services.issue_token(promoted, name="made before the ethics-officer grant")
    bystander = make_user("res2", alpha, ["researcher"])
    _, bystanders = services.issue_token(bystander, name="a researcher's")

    settings.CERES_REQUIRE_2FA = True
    grant_role("test", promoted, alpha, "ethics_officer")
    assert _walk_refused(before_switch, NO_SECOND_FACTOR) > 60
    assert _walk_refused(before_grant, NO_SECOND_FACTOR) > 60
    # Whom no rule asks for a second factor keeps their token.
    assert _api(bystanders).get("/api/studies/alpha/released-episodes/").status_code == 200

    # Enrolling does not revive the old token; a token made from a session that passed the second factor works.
    device = TOTPDevice.objects.create(user=officer, name="phone", confirmed=True)
    assert _api(before_switch).get("/api/studies/alpha/audit-events/").status_code == 403
    session = APIClient()
    session.post(reverse("login"), {"username": "ethics3", "password": "ethics-password-3"})
    assert session.post("/api/tokens/", {"name": "new"}, format="json").status_code == 403  # not passed yet
    assert session.post(reverse("second-factor"), {"code": _code(device)}).status_code == 302
    made = session.post("/api/tokens/", {"name": "new"}, format="json")
    assert made.status_code == 201
    assert _api(made.json()["key"]).get("/api/studies/alpha/audit-events/").status_code == 200
    page = session.post(reverse("account"), {"name": "from the page", "study": "", "days": 7})
    assert page.status_code == 200
    # The account page says which of the tokens are refused, and why.
    assert page.content.decode().count("refused: made without your second factor") == 1
    assert dict(ApiToken.objects.filter(user=officer).values_list("name", "second_factor")) == {
        "made before CERES_REQUIRE_2FA was on": False, "new": True, "from the page": True}


def test_a_token_made_without_the_second_factor_a_user_enrolled_in_is_refused(make_study, make_user):
    """Without CERES_REQUIRE_2FA, someone who enrolled of their own accord needs the factor at sign-in: a token made
    before they enrolled is refused too."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    alpha = make_study("alpha")
    user = make_user("res", alpha, ["researcher"])
    _, key = services.issue_token(user, name="old")
    assert _api(key).get("/api/studies/").status_code == 200
    TOTPDevice.objects.create(user=user, name="phone", confirmed=True)
    refused = _api(key).get("/api/studies/")
    assert refused.status_code == 403 and NO_SECOND_FACTOR in refused.json()["detail"]


def test_tokens_are_accepted_only_under_api():
    """Token authentication is the REST framework's: every view that takes it is under /api/, so the walks above
    cover every place a token opens. (The pages and the admin know sessions only.)"""
    from django.urls import URLPattern, URLResolver, get_resolver
    from rest_framework.views import APIView

    outside, inside = [], []

    def walk(resolver: URLResolver, prefix: str) -> None:
        for entry in resolver.url_patterns:
            here = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry, here)
            elif isinstance(entry, URLPattern):
                view = getattr(entry.callback, "cls", None) or getattr(entry.callback, "view_class", None)
                if isinstance(view, type) and issubclass(view, APIView):
                    (inside if here.lstrip("^").startswith("api/") else outside).append(here)

    walk(get_resolver(), "")
    assert outside == [] and len(inside) > 50
