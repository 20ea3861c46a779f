"""The faces API against every kind of caller, generated from the URL configuration: a pattern of a
``portal.faces`` view without an entry in ``EXPECTED`` fails. (The viewer's faces section is in the releases'
matrix, the face policy's setting in the registry's.)"""

from __future__ import annotations

import pytest

from tests.portal.matrix import ask_every_persona
from tests.portal.urlwalk import study_url_patterns

pytestmark = pytest.mark.django_db

C, E = "coordinator", "ethics_officer"
PERSONAS = ("coordinator", "ethics_officer", "researcher", "other_study", "anonymous")

# name -> [(method, roles allowed, status for an allowed caller)]; POSTs carry an empty body. The study's policy is
# redact and the episode has no detections yet: every change is refused by its serializer or its service.
EXPECTED: dict[str, list[tuple[str, tuple[str, ...], int]]] = {
    "api-episode-faces-detail": [("GET", (C, E), 200)],
    "api-episode-faces-add-box": [("POST", (E,), 400)],
    "api-episode-faces-remove-box": [("POST", (E,), 400)],
    "api-episode-faces-remove-detection": [("POST", (E,), 400)],
    "api-episode-faces-reviewed": [("POST", (E,), 400)],
    "api-episode-faces-detect": [("POST", (C, E), 200)],
}

PATTERNS = study_url_patterns("portal.faces")


def test_every_faces_url_has_an_expectation():
    assert sorted(PATTERNS) == sorted(EXPECTED)


@pytest.fixture
def world(reg, verified, policy, detector_id, make_user, make_study):
    policy("redact")
    episode = verified(1)[0]
    other = make_study(f"{reg.study.code}-b")
    return {
        "study": reg.study,
        "values": {"episode_index": episode.episode_index},
        "users": {"coordinator": reg.coordinator, "ethics_officer": reg.ethics,
                  "researcher": make_user(f"{reg.study.code}-r", reg.study, ["researcher"]),
                  "other_study": make_user(f"{reg.study.code}-o", other, ["coordinator", "ethics_officer"]),
                  "anonymous": None},
    }


def test_permission_matrix(client, world):
    for name in sorted(PATTERNS):
        ask_every_persona(client, world, name, PATTERNS[name], EXPECTED[name], PERSONAS)
