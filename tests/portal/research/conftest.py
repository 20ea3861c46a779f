"""Fixtures for researcher access: the release fixtures (registry, verified episodes, requests), a published
release, the study's data-use agreement, and a researcher who asked for access, accepted it and was granted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_scopes import scope

from portal.releases.models import ReleaseRequest
from portal.releases.services import publish
from portal.releases.services.approval import approve
from portal.research.services import access
from portal.studies.services.study import publish_data_use_agreement
from tests.portal.releases import conftest as releases

make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker = (
    releases.make_capture, releases.make_registry, releases.private_storage, releases.reg, releases.sent_tasks,
    releases.stored_objects, releases.unique_code, releases.worker)
team, verified_factory, verified, make_request = (releases.team, releases.verified_factory, releases.verified,
                                                  releases.make_request)

AGREEMENT = "Use the episodes only to train and evaluate robot policies. Do not try to identify anyone."


@pytest.fixture(params=["configured", "local"])
def storage_kind(request, settings, tmp_path):
    """Run a test on the storage the run is configured with (the S3 gateway in CI) and on local folders, whose
    links the portal signs itself: both kinds of link are tested wherever the suite runs."""
    if request.param == "local" and settings.STORAGE_BACKEND != "local":
        settings.STORAGES = {**settings.STORAGES, **{
            name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
                   "OPTIONS": {"location": str(tmp_path / "local-storage" / name)}}
            for name in settings.STORAGE_NAMES}}
    return request.param


@pytest.fixture
def agreement(reg):
    return publish_data_use_agreement(reg.coordinator, reg.study, text=AGREEMENT)


@pytest.fixture
def make_released(team, verified, make_request):
    """``make_released(episodes)``: a request of those episodes approved by two officers and published."""

    def make(episodes) -> ReleaseRequest:
        request = make_request(episodes)
        with scope(study=team.study):
            for officer in (team.reg.ethics, team.ethics2):
                approve(officer, request, manifest_sha256=request.manifest_sha256)
            publish.publish_release(request.pk)
            request = ReleaseRequest.objects.select_related("release", "study").get(pk=request.pk)
        assert request.state == ReleaseRequest.State.RELEASED
        return request

    return make


@pytest.fixture
def released(make_released, verified):
    """A published release of three episodes."""
    return make_released(verified(3))


@pytest.fixture
def make_researcher(reg, agreement, make_user):
    """``make_researcher(name, granted=True)``: a user who asked for access (accepting the agreement) and, unless
    ``granted=False``, was granted it for 30 days by the study's coordinator."""

    def make(name: str, *, granted: bool = True):
        user = make_user(f"{reg.study.code}-{name}")
        request = access.request_access(user, reg.study, purpose="train a grasping policy",
                                        version=agreement.version, sha256=agreement.sha256)
        if granted:
            access.grant_access(reg.coordinator, request, expires_at=timezone.now() + timedelta(days=30))
        return user

    return make


@pytest.fixture
def researcher(make_researcher):
    return make_researcher("researcher")
