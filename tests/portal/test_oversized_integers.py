"""Every integer from a URL, a form, a query string or JSON is range-checked: a number past what a column holds
is answered 400 naming it, never 500 (they used to be, also with DEBUG off), and nothing is written.

The URL walk is the class test: every route with an argument of ``<uint:...>`` is asked with a 20-digit number,
by a user holding every role of the study (so no permission check answers first), on a GET and a POST."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls.resolvers import RoutePattern

from portal.access.models import RoleGrant
from portal.audit.models import AuditEvent
from portal.core.integers import MAX_INT
from tests.portal.urlwalk import all_routes, url_of

pytestmark = pytest.mark.django_db

HUGE = 99999999999999999999  # 20 digits: past SQLite's and PostgreSQL's bigint
PAST_INTEGER = MAX_INT + 1  # past PostgreSQL's integer


@pytest.fixture
def study(make_study):
    return make_study("s1")


@pytest.fixture
def client(make_user, study, settings) -> Client:
    settings.DEBUG = False
    user = make_user("everyone", study, ["coordinator", "ethics_officer", "researcher"])
    user.is_staff = user.is_superuser = True
    user.save()
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _numbered_routes():
    from django.urls import get_resolver

    converters: dict[str, str] = {}  # route text -> ... : the routes whose patterns use <uint:>

    def walk(resolver, prefix):
        for entry in resolver.url_patterns:
            text = prefix + (str(entry.pattern) if isinstance(entry.pattern, RoutePattern) else "")
            if hasattr(entry, "url_patterns"):
                walk(entry, text)
            elif "<uint:" in text:
                converters[text] = text

    walk(get_resolver(), "")
    return [route for route in all_routes() if route.route in converters]


def test_every_numbered_route_answers_a_huge_number_with_400(client):
    routes = _numbered_routes()
    assert len(routes) >= 35, "the walk found the numbered routes"
    wrong = []
    for route in routes:
        for number in (HUGE, PAST_INTEGER):
            values = {name: number for name in route.arguments}
            values["study_code"] = "s1"
            url = url_of(route, values)
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                if response.status_code != 400 or b"must be between 0 and 2147483647" not in response.content:
                    wrong.append(f"{method.upper()} {url}: {response.status_code}")
    assert not wrong, "\n".join(wrong)


def test_the_400_page_is_in_the_layout_and_names_the_number(client):
    response = client.get(f"/studies/s1/releases/{HUGE}/")
    assert response.status_code == 400
    text = response.content.decode()
    assert "The portal could not read this request" in text
    assert f"A number in the address must be between 0 and 2147483647, not {HUGE}." in text
    assert 'href="/"' in text  # the layout's navigation


def test_parse_int_names_what_is_wrong():
    from portal.core.integers import IntegerOutOfRange, parse_int

    assert parse_int(" 2147483647 ", "n") == MAX_INT
    for value, message in [("2147483648", "n must be between 0 and 2147483647, not 2147483648"),
                           ("9" * 50, f"n must be between 0 and 2147483647, not {'9' * 40}…"),
                           ("-1", "n must be between 0 and 2147483647, not -1"),
                           ("1.5", "n must be a whole number, not '1.5'"), ("", "n must be a whole number, not ''"),
                           ("١٢", "n must be a whole number, not '١٢'"), (True, "n must be a whole number, not True")]:
        with pytest.raises(IntegerOutOfRange) as refused:
            parse_int(value, "n")
        assert str(refused.value) == message


def test_the_largest_number_is_still_a_number(client):
    """At the bound the number is looked up as any other: not found."""
    assert client.get(f"/studies/s1/releases/{MAX_INT}/").status_code == 404


def _post_json(client, url, body):
    return client.post(url, data=json.dumps(body), content_type="application/json")


@pytest.mark.parametrize("number", [HUGE, PAST_INTEGER, -1])
def test_api_integers_are_range_checked(client, number):
    before = AuditEvent.objects.count()
    answers = {
        "datasets": _post_json(client, "/api/studies/s1/datasets/",
                               {"episodes": [{"release": number, "episode_index": 0}]}),
        "dataset episode": _post_json(client, "/api/studies/s1/datasets/",
                                      {"episodes": [{"release": 1, "episode_index": number}]}),
        "release request": _post_json(client, "/api/studies/s1/release-requests/",
                                      {"episodes": [number], "purpose": "training"}),
        "token": _post_json(client, "/api/tokens/", {"name": "t", "days": number}),
        "consent event document": _post_json(client, "/api/studies/s1/consent-events/",
                                             {"demonstrator": "x", "kind": "given", "event_date": "2026-01-01",
                                              "document": number, "scopes": ["episode_release"]}),
        "access request": _post_json(client, "/api/access-requests/",
                                     {"study": "s1", "purpose": "p", "agreement_version": number,
                                      "agreement_sha256": "0" * 64}),
    }
    wrong = {name: (answer.status_code, answer.content[:300]) for name, answer in answers.items()
             if answer.status_code != 400}
    assert not wrong
    assert AuditEvent.objects.count() == before


def test_page_forms_and_queries_answer_400_or_a_form_error(client, study):
    grants = RoleGrant.objects.count()
    answers = {
        "new release, ticked episode": client.post("/studies/s1/releases/new/",
                                                   {"purpose": "training", "episodes": [str(HUGE)]}),
        "new release, headset filter": client.get(f"/studies/s1/releases/new/?headset={HUGE}"),
        "new release, demonstrator filter": client.get(f"/studies/s1/releases/new/?demonstrator={HUGE}"),
        "dataset from ticked items": client.post("/studies/s1/datasets/", {"items": [f"{HUGE}:{HUGE}"]}),
        "dataset from ticked index": client.post("/studies/s1/datasets/", {"items": [f"1:{HUGE}"]}),
        "browse, release filter": client.get(f"/studies/s1/released/?release={HUGE}"),
        "access request version": client.post("/studies/s1/access/request/",
                                              {"purpose": "p", "version": str(HUGE), "sha256": "0" * 64}),
        "agreement version": client.post("/studies/s1/access/agreement/", {"version": str(HUGE),
                                                                             "sha256": "0" * 64}),
        "token days": client.post("/accounts/", {"name": "t", "days": str(HUGE)}),
        "retain days": client.post("/studies/s1/settings/audio-policy/",
                                   {"audio_policy": "retain_days", "retain_days": str(HUGE)}),
    }
    wrong = {name: answer.status_code for name, answer in answers.items() if answer.status_code >= 500}
    assert not wrong
    assert answers["new release, ticked episode"].status_code == 400
    assert f"An episode index must be between 0 and 2147483647, not {HUGE}.".encode() in \
        answers["new release, ticked episode"].content
    assert answers["dataset from ticked items"].status_code == 400
    assert answers["dataset from ticked index"].status_code == 400
    assert RoleGrant.objects.count() == grants


NUMBERED_API_ARGUMENTS = {"pk", "number", "seq", "episode_index"}


def test_every_numbered_api_route_answers_a_huge_number_with_400(client):
    """The API's routes come from DRF's router (regular expressions, not ``<uint:>``): their numbered lookups
    are checked by ``BoundedApiLookups`` before any query."""
    routes = [route for route in all_routes() if route.route.startswith("api/")
              and NUMBERED_API_ARGUMENTS & set(route.arguments)]
    assert len(routes) >= 20, "the walk found the numbered API routes"
    wrong = []
    for route in routes:
        for number in (HUGE, PAST_INTEGER):
            values = {name: number for name in route.arguments}
            values["study_code"] = "s1"
            url = url_of(route, values)
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                if response.status_code != 400 or "must be between 0 and 2147483647" not in response.json()["detail"]:
                    wrong.append(f"{method.upper()} {url}: {response.status_code}")
    assert not wrong, "\n".join(wrong)
