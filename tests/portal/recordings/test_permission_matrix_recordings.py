"""Every recording page and API endpoint against every kind of caller, generated from the URL configuration:
a pattern of a ``portal.recordings`` view without an entry in ``EXPECTED`` fails."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.recordings.services.export import allocate_episode
from portal.recordings.services.ingest import ingest_path
from tests.portal.matrix import ask_every_persona
from tests.portal.urlwalk import study_url_patterns

pytestmark = pytest.mark.django_db

C, E = "coordinator", "ethics_officer"
PERSONAS = ("coordinator", "ethics_officer", "researcher", "other_study", "anonymous")
# A GET is asked for both as JSON and as HTML (what a browser sends: the API's browsable renderer).

# name -> [(method, roles allowed, status for an allowed caller)]; POSTs carry an empty body.
EXPECTED: dict[str, list[tuple[str, tuple[str, ...], int]]] = {
    "recording-list": [("GET", (C, E), 200)],
    "recording-upload": [("POST", (C,), 302)],
    "episode-list": [("GET", (C, E), 200)],
    "recording-detail": [("GET", (C, E), 200)],
    "recording-status": [("GET", (C, E), 200)],
    "recording-recheck": [("POST", (C,), 302)],
    "recording-retry": [("POST", (C,), 302)],
    "recording-register-demonstrator": [("POST", (C,), 302)],
    "api-recording-list": [("GET", (C, E), 200), ("POST", (C,), 400)],
    "api-recording-detail": [("GET", (C, E), 200)],
    "api-recording-recheck": [("POST", (C,), 200)],
    "api-recording-retry-export": [("POST", (C,), 400)],
    "api-recording-register-demonstrator": [("POST", (C,), 400)],
    "api-episode-list": [("GET", (C, E), 200)],
    "api-episode-detail": [("GET", (C, E), 200)],
}


PATTERNS = study_url_patterns("portal.recordings")


def test_every_recording_url_has_an_expectation():
    assert sorted(PATTERNS) == sorted(EXPECTED)


@pytest.fixture
def world(reg, make_capture, make_user, make_study):
    with scope(study=reg.study):
        quarantined = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims(headset_id="HS-X")))
        accepted = ingest_path(reg.coordinator, reg.study, make_capture(reg.claims()))
        episode = allocate_episode(accepted)
    other = make_study(f"{reg.study.code}-b")
    return {
        "study": reg.study,
        "values": {"uid": quarantined.uid, "episode_index": episode.episode_index},
        "users": {"coordinator": reg.coordinator, "ethics_officer": reg.ethics,
                  "researcher": make_user(f"{reg.study.code}-r", reg.study, ["researcher"]),
                  "other_study": make_user(f"{reg.study.code}-o", other, ["coordinator", "ethics_officer"]),
                  "anonymous": None},
    }


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_permission_matrix(client, world, name):
    ask_every_persona(client, world, name, PATTERNS[name], EXPECTED[name], PERSONAS)


def test_another_studys_recording_is_not_found_here(client, world, make_registry, make_capture):
    other = make_registry(code=f"{world['study'].code}-c")
    with scope(study=other.study):
        foreign = ingest_path(other.coordinator, other.study, make_capture(other.claims()))
    client.force_login(world["users"]["coordinator"])
    assert client.get(reverse("recording-detail", args=[world["study"].code, foreign.uid])).status_code == 404
    assert client.get(f"/api/studies/{world['study'].code}/recordings/{foreign.uid}/").status_code == 404
