"""Fixtures for researcher access: the release fixtures (registry, verified episodes, requests), a published
release, the study's data-use agreement, a researcher who asked for access, accepted it and was granted, and a
withdrawal's world (``world``, ``second``, ``withdraw``, ``run``)."""

from __future__ import annotations

import dataclasses
from datetime import date, timedelta

import pytest
from django.utils import timezone
from django_scopes import scope

from portal.notifications import services as notifications
from portal.notifications.models import Email, Notification
from portal.releases.models import ReleaseRequest
from portal.releases.services import publish
from portal.releases.services.approval import approve
from portal.research.models import Dataset, Withdrawal
from portal.research.services import access, catalogue, datasets, links, withdrawals
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.consent import give_consent
from portal.studies.services.demonstrators import create_demonstrator
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


# A withdrawal's world, shared by the tests of the withdrawal job, of supersede and of the dashboard after it.


@pytest.fixture
def second(reg):
    """A second demonstrator of the study, with consent, who does not withdraw."""
    with scope(study=reg.study):
        other = create_demonstrator(reg.coordinator, reg.study, headset=reg.headset)
        give_consent(reg.coordinator, other, document=reg.document, consent_date=date.today() - timedelta(days=30),
                     scopes=["episode_release"])
    return dataclasses.replace(reg, demonstrator=other)


def item(request, index):
    """The released item of episode ``index`` in ``request``."""
    with scope(study=request.study):
        return catalogue.released_items().select_related("request", "episode__recording").get(
            request=request, episode_index=index)


def researcher_with_email(make_researcher, name):
    user = make_researcher(name)
    user.email = f"{name}@lab.example"
    user.save()
    return user


@pytest.fixture
def world(reg, second, verified_factory, make_released, make_request, make_researcher, client):
    """Episodes 0 and 2 of the withdrawing demonstrator, 1 of the other; release-0001 holds all three, release-0002
    only episode 1; dataset-0001 holds 0 and 1, dataset-0002 only 1; a draft (release-0003) holds episode 2. r1
    downloaded a file of episode 0, r2 only of episode 1, r3 built dataset-0001 and downloaded from it, r4 only
    used release-0002."""
    episodes = [verified_factory(reg), verified_factory(second), verified_factory(reg)]
    first = make_released(episodes)
    other = make_released([episodes[1]])
    draft = make_request([episodes[2]], submit=False)
    r1, r2, r3, r4 = (researcher_with_email(make_researcher, name) for name in ("r1", "r2", "r3", "r4"))
    with scope(study=reg.study):
        links.release_links(r1, first, ["episode-000000/meta/info.json"], via="api")
        links.release_links(r2, first, ["episode-000001/meta/info.json"], via="api")
        links.release_links(r4, other, via="api")
        with_hole, _ = datasets.request_dataset(r3, reg.study, [item(first, 0), item(first, 1)])
        datasets.build_dataset(with_hole.pk)
        untouched, _ = datasets.request_dataset(r4, reg.study, [item(other, 1)])
        datasets.build_dataset(untouched.pk)
        links.dataset_links(r3, Dataset.objects.get(pk=with_hole.pk), ["meta/info.json"], via="api")
    return dataclasses.make_dataclass("World", ["first", "other", "draft", "researchers", "datasets"])(
        first, other, draft, {"r1": r1, "r2": r2, "r3": r3, "r4": r4}, (with_hole, untouched))


def withdraw(reg, django_capture_on_commit_callbacks, sent_tasks) -> Withdrawal:
    """The coordinator records the consent withdrawal of ``reg``'s demonstrator; the withdrawal job is queued."""
    with scope(study=reg.study), django_capture_on_commit_callbacks(execute=True):
        event = withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(),
                                 reason="asked by the participant")
    with scope(study=reg.study):
        withdrawal = Withdrawal.objects.select_related("study").get(event=event)
    assert ("research.apply_withdrawal", (withdrawal.pk,)) in sent_tasks
    return withdrawal


def run(withdrawal: Withdrawal) -> Withdrawal:
    """The job, then the emails of its messages (what the worker sends once the job's transactions commit)."""
    with scope(study=withdrawal.study):
        withdrawals.apply_withdrawal(withdrawal.pk)
        for pending in Notification.objects.filter(key=f"withdrawal:{withdrawal.pk}", email=Email.PENDING):
            notifications.deliver(pending.pk)
        return Withdrawal.objects.get(pk=withdrawal.pk)
