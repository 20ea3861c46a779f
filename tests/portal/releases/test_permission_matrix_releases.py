"""Every release page and API endpoint against every kind of caller, generated from the URL configuration:
a pattern of a ``portal.releases`` view without an entry in ``EXPECTED`` fails."""

from __future__ import annotations

import pytest

from tests.portal.matrix import ask_every_persona
from tests.portal.urlwalk import study_url_patterns

pytestmark = pytest.mark.django_db

C, E = "coordinator", "ethics_officer"
PERSONAS = ("coordinator", "ethics_officer", "researcher", "other_study", "anonymous")

# name -> [(method, roles allowed, status for an allowed caller)]; POSTs carry an empty body. The request is
# awaiting approval, asked for by the coordinator; every POST here is refused by its service or form.
EXPECTED: dict[str, list[tuple[str, tuple[str, ...], int]]] = {
    "release-list": [("GET", (C, E), 200)],
    "release-new": [("GET", (C,), 200), ("POST", (C,), 400)],
    "release-detail": [("GET", (C, E), 200)],
    "release-status": [("GET", (C, E), 200)],
    "release-submit": [("POST", (C,), 302)],
    "release-approve": [("POST", (E,), 302)],
    "release-reject": [("POST", (C, E), 302)],
    "release-reverify": [("POST", (C, E), 302)],
    "release-retry": [("POST", (C, E), 302)],
    "release-manifest": [("GET", (C, E), 200)],
    "release-signature": [("GET", (C, E), 404)],
    "release-episode": [("GET", (C, E), 200)],
    "release-episode-data": [("GET", (C, E), 200)],
    "release-episode-video": [("GET", (C, E), 200)],
    # The faces section (the study's policy is off here: each POST is refused by its form or service, a message).
    "release-episode-faces": [("GET", (C, E), 200)],
    "release-episode-faces-add-box": [("POST", (E,), 302)],
    "release-episode-faces-remove-box": [("POST", (E,), 302)],
    "release-episode-faces-remove-detection": [("POST", (E,), 302)],
    "release-episode-faces-reviewed": [("POST", (E,), 302)],
    "release-episode-faces-detect": [("POST", (C, E), 302)],
    "api-release-request-list": [("GET", (C, E), 200), ("POST", (C,), 400)],
    "api-release-request-detail": [("GET", (C, E), 200)],
    "api-release-request-submit": [("POST", (C,), 400)],
    "api-release-request-approve": [("POST", (E,), 400)],
    "api-release-request-reject": [("POST", (C, E), 400)],
    "api-release-request-reverify": [("POST", (C, E), 202)],
    "api-release-request-retry": [("POST", (C, E), 400)],
    "api-release-request-review": [("GET", (C, E), 200)],
}

PATTERNS = study_url_patterns("portal.releases")


def test_every_release_url_has_an_expectation():
    assert sorted(PATTERNS) == sorted(EXPECTED)


@pytest.fixture
def world(reg, verified, make_request, make_user, make_study):
    episode = verified(1)[0]
    request = make_request([episode])
    other = make_study(f"{reg.study.code}-b")
    return {
        "study": reg.study,
        "values": {"number": request.number, "episode_index": episode.episode_index},
        "users": {"coordinator": reg.coordinator, "ethics_officer": reg.ethics,
                  "researcher": make_user(f"{reg.study.code}-r", reg.study, ["researcher"]),
                  "other_study": make_user(f"{reg.study.code}-o", other, ["coordinator", "ethics_officer"]),
                  "anonymous": None},
    }


def test_permission_matrix(client, world):
    for name in sorted(PATTERNS):
        ask_every_persona(client, world, name, PATTERNS[name], EXPECTED[name], PERSONAS)


def test_the_public_key_needs_no_sign_in(client):
    response = client.get("/.well-known/ceres-release-key")
    assert response.status_code == 200 and response.content.startswith(b"-----BEGIN PUBLIC KEY-----")
