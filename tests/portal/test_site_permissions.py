"""Every URL that is not a study's page or endpoint, against every kind of caller: the site's own pages and
API (``SITE``), and every page of the admin (staff only, walked from the URL configuration)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.urls import reverse

from portal.accounts.services import issue_token
from portal.research.services.access import request_access
from portal.studies.services.study import publish_data_use_agreement
from tests.portal.urlwalk import Route, all_routes, url_of

pytestmark = pytest.mark.django_db

PERSONAS = ("anonymous", "member", "outsider", "staff")
ACCEPTS = ("application/json", "text/html")  # every GET is asked as an API client and as a browser
TO_LOGIN = "/accounts/login/?next="


@dataclass(frozen=True)
class Expect:
    method: str
    answers: dict[str, int | tuple[int, str]]  # persona -> status, or (302, the start of its Location)
    only: str | None = None  # the one format of ACCEPTS it serves; asked for the other, everyone gets 406


def _e(method: str, anonymous, member, outsider, staff, *, only: str | None = None) -> Expect:
    return Expect(method, {"anonymous": anonymous, "member": member, "outsider": outsider, "staff": staff}, only)


# member: a coordinator of study alpha; outsider: a coordinator of study beta; staff: a site administrator with
# no role in any study. The token URLs name a token of the member's.
SITE: dict[str, Expect] = {
    "dashboard": _e("GET", (302, TO_LOGIN), 200, 200, 200),
    "login": _e("GET", 200, 200, 200, 200),
    "logout": _e("POST", (302, "/accounts/login/"), (302, "/accounts/login/"), (302, "/accounts/login/"),
                 (302, "/accounts/login/")),
    "account": _e("GET", (302, TO_LOGIN), 200, 200, 200),
    "token-revoke": _e("POST", (302, TO_LOGIN), (302, "/accounts/"), 404, 404),
    "second-factor": _e("GET", (302, TO_LOGIN), 200, 200, 200),
    "second-factor-remove": _e("POST", (302, TO_LOGIN), (302, "/accounts/"), (302, "/accounts/"),
                               (302, "/accounts/")),
    "recovery-codes": _e("POST", (302, TO_LOGIN), (302, "/accounts/"), (302, "/accounts/"), (302, "/accounts/")),
    "email-change": _e("POST", (302, TO_LOGIN), (302, "/accounts/#email"), (302, "/accounts/#email"),
                       (302, "/accounts/#email")),
    "email-remove": _e("POST", (302, TO_LOGIN), (302, "/accounts/#email"), (302, "/accounts/#email"),
                       (302, "/accounts/#email")),
    "email-confirm": _e("GET", (302, TO_LOGIN), 200, 200, 200),  # a page with a button; the link is no key alone
    "password-change": _e("GET", (302, TO_LOGIN), 200, 200, 200),
    # Password reset: for anyone; the link's own page refuses a link that is not valid.
    "password-reset": _e("GET", 200, 200, 200, 200),
    "password-reset-done": _e("GET", 200, 200, 200, 200),
    "password-reset-complete": _e("GET", 200, 200, 200, 200),
    "password-reset-confirm": _e("GET", 200, 200, 200, 200),
    "healthz": _e("GET", 200, 200, 200, 200),
    "release-public-key": _e("GET", 200, 200, 200, 200),  # public: anyone verifies a release with it
    # The researchers' client: public, as pip fetches it with no session. The matrix asks for a wheel of another
    # version (404 for everyone, not a login); tests/portal/research/test_client.py serves the built one.
    "client": _e("GET", 200, 200, 200, 200),
    "client-wheel": _e("GET", 404, 404, 404, 404),
    "favicon.ico": _e("GET", (302, "/static/favicon"), (302, "/static/favicon"), (302, "/static/favicon"),
                      (302, "/static/favicon")),
    "api-root": _e("GET", 403, 200, 200, 200),
    "api-schema": _e("GET", 403, 200, 200, 200, only="application/json"),  # JSON or YAML, never a page
    "api-docs": _e("GET", 403, 200, 200, 200, only="text/html"),  # Swagger UI's page
    "api-token-list": _e("GET", 403, 200, 200, 200),
    "api-token-detail": _e("DELETE", 403, 204, 404, 404),  # revoking is all a token's own URL does
    "api-study-list": _e("GET", 403, 200, 200, 200),
    "api-study-detail": _e("GET", 403, 200, 404, 404),  # staff status gives no study data
    # Researcher access: anyone signed in sees their own; a download link is its own key (none is valid here).
    "research-home": _e("GET", (302, TO_LOGIN), 200, 200, 200),
    "research-links": _e("GET", (302, TO_LOGIN), 200, 200, 200),
    "research-download": _e("GET", 403, 403, 403, 403),
    "api-my-access-request-list": _e("GET", 403, 200, 200, 200),
    "api-my-access-request-cancel": _e("POST", 403, 200, 404, 404),  # the member's own request, once
    # The inbox: everyone signed in has their own; a message that is not theirs is not there (404).
    "notifications": _e("GET", (302, TO_LOGIN), 200, 200, 200),
    "notification-open": _e("GET", (302, TO_LOGIN), 404, 404, 404),
    "notifications-read-all": _e("POST", (302, TO_LOGIN), (302, "/notifications/"), (302, "/notifications/"),
                                 (302, "/notifications/")),
    "notification-email-switches": _e("POST", (302, TO_LOGIN), (302, "/accounts/"), (302, "/accounts/"),
                                      (302, "/accounts/")),
}
# Asked with GET as well: a state change is never made by a link.
SITE_GET_REFUSED = ("logout", "token-revoke", "second-factor-remove", "recovery-codes", "email-change",
                    "email-remove", "notifications-read-all", "notification-email-switches")

ROUTES = {route.key: route for route in all_routes()}
ADMIN = sorted(key for key, route in ROUTES.items() if route.namespace == "admin")


@pytest.fixture
def world(make_study, make_user, django_user_model):
    alpha = make_study("alpha")
    member = make_user("member", alpha, ["coordinator"])
    outsider = make_user("outsider", make_study("beta"), ["coordinator"])
    staff = django_user_model.objects.create_user("site-admin", password="pw-" * 4, is_staff=True)
    token, _ = issue_token(member, name="laptop")
    agreement = publish_data_use_agreement(member, alpha, text="Use the data for robot learning only.")
    pending = request_access(member, alpha, purpose="a policy", version=agreement.version, sha256=agreement.sha256)
    return {"users": {"anonymous": None, "member": member, "outsider": outsider, "staff": staff},
            "values": {"pk": token.pk, "code": alpha.code, "uid": pending.uid, "token": "not-a-signed-link",
                       "uidb64": "MQ", "filename": "ceres_pull-0.0.0-py3-none-any.whl"}}


def _ask(client, user, method: str, url: str, accept: str = "*/*"):
    client.logout()
    if user is not None:
        client.force_login(user)
    return client.generic(method, url, headers={"accept": accept})


def test_every_site_url_has_an_expectation():
    site = {key for key, route in ROUTES.items() if not route.namespace and "study_code" not in route.arguments}
    assert sorted(site) == sorted(SITE)


@pytest.mark.parametrize("key", sorted(SITE))
def test_site_permission_matrix(client, world, key):
    expect = SITE[key]
    url = url_of(ROUTES[key], world["values"])
    for accept in ACCEPTS if expect.method == "GET" else ("*/*",):
        for persona in PERSONAS:
            response = _ask(client, world["users"][persona], expect.method, url, accept)
            answer = expect.answers[persona] if expect.only in (None, accept) else 406
            status, location = answer if isinstance(answer, tuple) else (answer, None)
            where = f"{expect.method} {url} ({accept}) as {persona}"
            assert response.status_code == status, f"{where}: {response.status_code}"
            if location is not None:
                assert response["Location"].startswith(location), f"{where}: to {response['Location']}"
    if key in SITE_GET_REFUSED:
        for persona in ("member", "staff"):
            assert _ask(client, world["users"][persona], "GET", url).status_code == 405, f"GET {url} as {persona}"


def _admin_url(route: Route) -> str:
    return url_of(route, {"object_id": 1, "content_type_id": 1, "id": 1, "app_label": "studies", "url": "nowhere/"})


# The admin's own sign-in and sign-out pages answer everyone; every other admin URL is behind its gate.
ADMIN_GATE = {
    "admin:login": {"anonymous": (200, None), "member": (200, None), "staff": (302, "/admin/")},
    "admin:logout": {"anonymous": (302, "/admin/"), "member": (302, "/admin/"), "staff": (405, None)},  # POST only
}


def test_the_admin_is_for_staff_only(client, world):
    """Every admin URL sends the anonymous and a signed-in non-staff user to the admin's login; staff get past
    that gate (their own model permissions decide what follows, never a server error)."""
    wrong = []
    for key in ADMIN:
        url = _admin_url(ROUTES[key])
        for persona in ("anonymous", "member", "staff"):
            response = _ask(client, world["users"][persona], "GET", url)
            answer = (response.status_code, response.get("Location"))
            if key in ADMIN_GATE:
                status, location = ADMIN_GATE[key][persona]
                expected = answer[0] == status and (location is None or answer[1] == location)
            elif persona == "staff":
                expected = answer[0] < 500 and not (answer[1] or "").startswith("/admin/login/")
            else:
                expected = answer[0] == 302 and answer[1].startswith("/admin/login/?next=")
            if not expected:
                wrong.append(f"GET {url} as {persona}: {answer}")
    assert not wrong, "\n".join(wrong)
    assert len(ADMIN) > 100  # every registered model's pages: the walk found them
    client.force_login(world["users"]["staff"])
    assert client.get(reverse("admin:index")).status_code == 200
