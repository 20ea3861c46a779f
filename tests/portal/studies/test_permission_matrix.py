"""Every registry page and API endpoint against every kind of caller, generated from the URL configuration.

The walk finds every URL pattern with a ``study_code`` argument whose view belongs to
``portal.studies``; a pattern without an entry in ``EXPECTED`` fails, so a new endpoint cannot be
added without deciding who may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import pytest
from django.urls import reverse

from portal.studies.services.consent import give_consent
from tests.portal.urlwalk import study_url_patterns

C, E, R = "coordinator", "ethics_officer", "researcher"
PERSONAS = ("coordinator", "ethics_officer", "researcher", "other_study", "anonymous")
ACCEPTS = ("application/json", "text/html")


@dataclass(frozen=True)
class Expect:
    method: str
    roles: frozenset[str]
    status: int  # the answer for an allowed caller
    query: str = ""


def _e(method: str, roles: tuple[str, ...], status: int, query: str = "") -> Expect:
    return Expect(method, frozenset(roles), status, query)


EXPECTED: dict[str, Expect] = {
    # pages (POSTs are sent with an empty form: an allowed caller gets the form errors or a redirect)
    "study-overview": _e("GET", (C, E, R), 200),
    "study-settings": _e("GET", (C, E), 200),
    "study-set-status": _e("POST", (C,), 400),
    "study-set-audio-policy": _e("POST", (C,), 400),
    "study-set-approvals": _e("POST", (E,), 400),
    "study-set-face-policy": _e("POST", (E,), 400),
    "study-confirm-approvals": _e("POST", (E,), 400),
    "study-set-approval-second-factor": _e("POST", (C,), 302),
    "study-set-carry-over-approvals": _e("POST", (C,), 302),
    "study-publish-agreement": _e("POST", (C,), 400),
    "study-headsets": _e("GET", (C,), 200),
    "study-import-headsets": _e("POST", (C,), 400),
    "study-suggest-headsets": _e("GET", (C, E), 200, "?q=HS"),
    "study-assign-headset": _e("POST", (C,), 302),
    "study-retire-headset": _e("POST", (C,), 302),
    "study-demonstrators": _e("GET", (C, E), 200),
    "study-create-demonstrator": _e("POST", (C,), 302),
    "study-suggest-demonstrators": _e("GET", (C, E), 200, "?q=a"),
    "study-demonstrator": _e("GET", (C, E), 200),
    "study-give-consent": _e("POST", (C,), 400),
    "study-consent-documents": _e("GET", (C, E), 200),
    "study-upload-consent-document": _e("POST", (C,), 400),
    "study-consent-document-file": _e("GET", (C, E), 200),
    "study-accept-consent-document": _e("POST", (E,), 302),
    # API
    "api-approval-policy-list": _e("GET", (C, E), 200),
    "api-approval-policy-confirm": _e("POST", (E,), 400),
    "api-headset-list": _e("GET", (C, E), 200),
    "api-headset-detail": _e("GET", (C, E), 200),
    "api-headset-import-csv": _e("POST", (C,), 400),
    "api-headset-assign": _e("POST", (C,), 400),
    "api-headset-retire": _e("POST", (C,), 400),
    "api-demonstrator-list": _e("GET", (C, E), 200),
    "api-demonstrator-detail": _e("GET", (C, E), 200),
    "api-demonstrator-coverage": _e("GET", (C, E), 200, "?scope=episode_release&date=2026-03-01"),
    "api-consent-document-list": _e("GET", (C, E), 200),
    "api-consent-document-detail": _e("GET", (C, E), 200),
    "api-consent-document-accept": _e("POST", (E,), 200),
}
# Write actions that share a URL with a read: checked with POST as well.
EXPECTED_POST_ON_LIST = {
    "api-approval-policy-list": _e("POST", (E,), 400),
    "study-headsets": _e("POST", (C,), 400),
    "api-headset-list": _e("POST", (C,), 400),
    "api-demonstrator-list": _e("POST", (C,), 201),
    "api-consent-document-list": _e("POST", (C,), 400),
}


# The study's audit pages (studies/audit_views.py, audit_api.py) have their own matrix (tests/portal/audit).
STUDY_PATTERNS = {name: arguments for name, arguments in study_url_patterns("portal.studies").items()
                  if name not in study_url_patterns("portal.studies.audit_")}


def test_every_registry_url_has_an_expectation():
    missing = sorted(set(STUDY_PATTERNS) - set(EXPECTED))
    assert not missing, f"URL(s) without an entry in EXPECTED: {missing}"
    assert not set(EXPECTED) - set(STUDY_PATTERNS), "EXPECTED names URLs that no longer exist"


@pytest.fixture
def world(study, make_user, coordinator, ethics, make_study, headset, demonstrator, accepted_document):
    event = give_consent(coordinator, demonstrator, document=accepted_document, consent_date=date(2026, 2, 1),
                         scopes=["episode_release"])
    pending = _pending_document(coordinator, study)
    other = make_study("beta")
    return {
        "users": {
            "coordinator": coordinator,
            "ethics_officer": ethics,
            "researcher": make_user("researcher", study, ["researcher"]),
            "other_study": make_user("outsider", other, ["coordinator", "ethics_officer", "researcher"]),
            "anonymous": None,
        },
        "ids": {"headset": headset.pk, "demonstrator": demonstrator.pk, "document": pending.pk, "event": event.pk},
        "study": study,
    }


def _pending_document(coordinator, study):
    import io

    from portal.studies.services.consent import upload_consent_document

    return upload_consent_document(coordinator, study, identifier="ICF-PENDING", version="1",
                                   uploaded_file=io.BytesIO(b"pending"), issued_on=date(2026, 1, 1))


# The consent events and the withdrawal form are routed from research (a withdrawal starts there): its matrix
# holds them (tests/portal/research/test_permission_matrix_research.py).
_PK_OWNER = {"api-headset": "headset", "api-demonstrator": "demonstrator", "api-consent-document": "document"}


def _kwargs(name: str, arguments: list[str], world) -> dict:
    kwargs = {}
    for argument in arguments:
        if argument == "study_code":
            kwargs[argument] = world["study"].code
        elif argument == "pk":
            owner = next(owner for prefix, owner in _PK_OWNER.items() if name.startswith(prefix + "-"))
            kwargs[argument] = world["ids"][owner]
        elif argument.endswith("_pk"):
            kwargs[argument] = world["ids"][argument.removesuffix("_pk")]
        else:
            raise AssertionError(f"no fixture value for URL argument {argument!r} of {name}")
    return kwargs


def _check(client, url: str, expect: Expect, persona: str, user) -> None:
    # A GET is asked for both as JSON and as HTML (what a browser sends: the API's browsable renderer).
    for accept in ACCEPTS if expect.method == "GET" else ("*/*",):
        _check_one(client, url, expect, persona, user, accept)


def _check_one(client, url: str, expect: Expect, persona: str, user, accept: str) -> None:
    if user is not None:
        client.force_login(user)
    response = client.generic(expect.method, url + expect.query, headers={"accept": accept})
    where = f"{expect.method} {url} ({accept}) as {persona}"
    is_api = url.startswith("/api/")
    if persona == "anonymous":
        if is_api:
            assert response.status_code == 403, where
        else:
            assert response.status_code == 302, where
            assert response["Location"].startswith(reverse("login") + "?next="), where
    elif persona in expect.roles:
        assert response.status_code == expect.status, f"{where}: {response.status_code}"
    else:
        assert response.status_code == 403, f"{where}: {response.status_code}"
    client.logout()


@pytest.mark.parametrize("name", sorted(STUDY_PATTERNS))
def test_permission_matrix(client, world, name):
    url = reverse(name, kwargs=_kwargs(name, STUDY_PATTERNS[name], world))
    checks = [EXPECTED[name]] + ([EXPECTED_POST_ON_LIST[name]] if name in EXPECTED_POST_ON_LIST else [])
    for expect in checks:
        for persona in PERSONAS:
            _check(client, url, expect, persona, world["users"][persona])


def test_unknown_study_is_404_for_a_signed_in_user(client, world):
    client.force_login(world["users"]["coordinator"])
    assert client.get("/studies/nope/headsets/").status_code == 404
    assert client.get("/api/studies/nope/headsets/").status_code == 404


def test_study_list_shows_only_the_callers_studies(client, world):
    client.force_login(world["users"]["other_study"])
    codes = [s["code"] for s in client.get("/api/studies/").json()["results"]]
    assert codes == ["beta"]
    assert client.get("/api/studies/alpha/").status_code == 404
    client.logout()
    assert client.get("/api/studies/").status_code == 403


def test_ids_of_another_study_are_not_found_through_this_studys_urls(client, world, coordinator, make_user):
    from portal.studies.services.headsets import register_headset

    beta = world["users"]["other_study"].role_grants.first().study
    foreign = register_headset(world["users"]["other_study"], beta, headset_id="HS-BETA")
    client.force_login(coordinator)
    assert client.post(f"/studies/alpha/headsets/{foreign.pk}/retire/", {"retired_on": "2026-05-01"}).status_code == 404
    assert client.get(f"/api/studies/alpha/headsets/{foreign.pk}/").status_code == 404
    foreign.refresh_from_db()
    assert foreign.retired_on is None
