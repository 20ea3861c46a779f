"""Fixtures for releases: the recording pipeline's registry, storage and capture fixtures, verified episodes
exported from generated captures, and a request ready for approval."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django_scopes import scope

from portal.recordings.models import Episode
from portal.recordings.services.export import export_recording
from portal.recordings.services.ingest import ingest_path
from portal.recordings.services.verification import verify_episode
from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, release_requests
from tests.portal.recordings import conftest as pipeline

# The pipeline's fixtures, shared: its registry, private storage, generated captures, enqueued tasks, a worker.
make_capture, make_registry, private_storage, reg = (pipeline.make_capture, pipeline.make_registry,
                                                     pipeline.private_storage, pipeline.reg)
sent_tasks, stored_objects, unique_code, worker = (pipeline.sent_tasks, pipeline.stored_objects,
                                                   pipeline.unique_code, pipeline.worker)


@dataclass
class Team:
    """The registry plus a second ethics officer and a coordinator who is also an ethics officer."""

    reg: object
    ethics2: object
    both: object

    @property
    def study(self):
        return self.reg.study


@pytest.fixture
def team(reg, make_user) -> Team:
    code = reg.study.code
    return Team(reg, make_user(f"{code}-ethics2", reg.study, ["ethics_officer"]),
                make_user(f"{code}-both", reg.study, ["coordinator", "ethics_officer"]))


@pytest.fixture
def verified_factory(make_capture):
    """``verified_factory(registry, **capture_options)``: an episode of the registry's study, exported and verified
    from a fresh capture."""

    def make(registry, **options) -> Episode:
        with scope(study=registry.study):
            capture = make_capture(registry.claims(), **{"seconds": 1.0, "width": 32, "height": 24, **options})
            recording = ingest_path(registry.coordinator, registry.study, capture)
            export_recording(recording.pk)
            episode = Episode.objects.select_related("recording").get(recording=recording)
            verify_episode(episode)
            episode.refresh_from_db()
        return episode

    return make


@pytest.fixture
def verified(reg, verified_factory):
    """``verified(count, **capture_options)``: episodes of the registry's study, exported and verified."""
    return lambda count=1, **options: [verified_factory(reg, **options) for _ in range(count)]


@pytest.fixture
def make_request(reg):
    """``make_request(episodes, by=..., submit=True)``: a request, inspected like the task does, submitted."""

    def make(episodes, *, by=None, submit: bool = True, purpose: str = "policy training") -> ReleaseRequest:
        with scope(study=reg.study):
            request = release_requests.create_request(by or reg.coordinator, reg.study, episodes=episodes,
                                                      purpose=purpose)
            gate.inspect_request(request)
            if submit:
                release_requests.submit(by or reg.coordinator, request)
            request.refresh_from_db()
        return request

    return make
