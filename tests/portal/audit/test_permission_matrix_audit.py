"""Every audit page and API endpoint against every kind of caller, generated from the URL configuration: a
pattern of an audit page's view (``portal.studies.audit_views``, ``audit_api``) without an entry in ``EXPECTED``
fails. Only the study's coordinators and ethics officers read its audit log."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.audit.services import record
from tests.portal.matrix import ask_every_persona
from tests.portal.urlwalk import study_url_patterns

pytestmark = pytest.mark.django_db

C, E = "coordinator", "ethics_officer"
PERSONAS = ("coordinator", "ethics_officer", "researcher", "other_study", "anonymous")

# name -> [(method, roles allowed, status for an allowed caller)]
EXPECTED: dict[str, list[tuple[str, tuple[str, ...], int]]] = {
    "audit-list": [("GET", (C, E), 200)],
    "audit-export": [("GET", (C, E), 200)],
    "audit-event": [("GET", (C, E), 200)],
    "api-audit-event-list": [("GET", (C, E), 200)],
    "api-audit-event-detail": [("GET", (C, E), 200)],
}

PATTERNS = study_url_patterns("portal.studies.audit_")


def test_every_audit_url_has_an_expectation():
    assert sorted(PATTERNS) == sorted(EXPECTED)


@pytest.fixture
def world(make_study, make_user):
    study, other = make_study("alpha"), make_study("beta")
    users = {"coordinator": make_user("c", study, [C]), "ethics_officer": make_user("e", study, [E]),
             "researcher": make_user("r", study, ["researcher"]), "other_study": make_user("o", other, [C, E]),
             "anonymous": None}
    event = record("tester", "test.event", study)
    return {"study": study, "values": {"seq": event.seq}, "users": users}


def test_permission_matrix(client, world):
    for name in sorted(PATTERNS):
        ask_every_persona(client, world, name, PATTERNS[name], EXPECTED[name], PERSONAS)


def test_an_event_of_another_study_is_not_found_here(client, world, make_study):
    elsewhere = record("tester", "test.event", make_study("gamma"))
    client.force_login(world["users"]["coordinator"])
    assert client.get(reverse("audit-event", args=["alpha", elsewhere.seq])).status_code == 404
    assert client.get(f"/api/studies/alpha/audit-events/{elsewhere.seq}/").status_code == 404
