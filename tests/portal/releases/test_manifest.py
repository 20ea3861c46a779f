"""What is signed is byte for byte what the ethics officers approved (services/manifest.py: the section rebuilt
from the rows, ``approval_mismatches``; checked by the release job).

An administrator renaming the requester or an officer changes nothing the officers approved (the names are frozen
on the request and its approvals); someone who can write to the database and changes, adds or removes anything
the manifest names after the final approval gets a failed release, an alert and an audit event, and nothing in
the releases storage."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.urls import reverse
from django_scopes import scope

from exporter.cli import main as exporter_main
from exporter.release import MANIFEST
from exporter.timestamps import rfc3339
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.fixity.models import Alert
from portal.releases.models import Approval, ReleaseItem, ReleaseRequest
from portal.releases.services import manifest, publish
from portal.releases.services.approval import approve

pytestmark = pytest.mark.django_db
State = ReleaseRequest.State


@pytest.fixture
def approved(team, verified, make_request):
    """A request of two episodes approved by the study's two ethics officers (the study needs two)."""
    request = make_request(verified(2))
    with scope(study=team.study):
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
    return load(request)


def load(request: ReleaseRequest) -> ReleaseRequest:
    with scope(study=request.study):
        return ReleaseRequest.objects.select_related("study").get(pk=request.pk)


def publish_now(request: ReleaseRequest) -> None:
    with scope(study=request.study):
        publish.publish_release(request.pk)


def rename(user, name: str) -> None:
    """What an administrator does in the admin's user page."""
    user.username = name
    user.save()


def download(prefix: str, folder: Path) -> Path:
    releases = storages["releases"]
    for name in storage.walk(releases, prefix):
        storage.fetch(releases, name, folder / name[len(prefix):])
    return folder


def verify(folder: Path, client, tmp_path: Path) -> int:
    key = tmp_path / "key.pem"
    key.write_bytes(client.get("/.well-known/ceres-release-key").content)
    return exporter_main(["verify-release", str(folder), "--public-key", str(key)])


def test_renaming_the_requester_and_an_officer_after_approval_releases_what_was_approved(approved, team, client,
                                                                                          tmp_path):
    requester, officer = team.reg.coordinator.username, team.reg.ethics.username
    rename(team.reg.coordinator, "renamed-coordinator")
    rename(team.reg.ethics, "renamed-ethics")

    publish_now(approved)
    released = load(approved)
    assert released.state == State.RELEASED, released.reason
    folder = download(approved.prefix, tmp_path / "release")
    assert verify(folder, client, tmp_path) == 0
    signed = json.loads((folder / MANIFEST).read_bytes())
    assert signed["release"]["requested_by"] == requester
    assert sorted(a["officer"] for a in signed["approvals"]) == sorted([officer, team.ethics2.username])
    assert {a["manifest_sha256"] for a in signed["approvals"]} == {approved.manifest_sha256}


def test_a_request_awaiting_approval_is_approved_after_its_requester_is_renamed(team, verified, make_request):
    request = make_request(verified(1))
    with scope(study=team.study):
        approve(team.reg.ethics, request, manifest_sha256=request.manifest_sha256)
        rename(team.reg.coordinator, "renamed-coordinator")
        rename(team.reg.ethics, "renamed-ethics")
        approve(team.ethics2, request, manifest_sha256=request.manifest_sha256)
    assert load(request).state == State.APPROVED


# --- a database writer changes what the manifest names after the final approval ----------------------------------


def _request(field: str, value):
    def change(request, context):
        ReleaseRequest.objects.filter(pk=request.pk).update(**{field: value(request, context)})
    return change


def _item(change_item):
    def change(request, context):
        item = ReleaseItem.objects.filter(request=request).order_by("episode_index").last()
        for field, value in change_item(item).items():
            setattr(item, field, value)
        item.save()
    return change


def _approval(field: str, value):
    def change(request, context):
        approval = Approval.objects.filter(request=request).order_by("pk").first()
        setattr(approval, field, value(approval))
        approval.save()
    return change


def _rewrite_every_digest(request, context):
    """The careful writer: changes the purpose and writes the new section's digest on the request and on every
    approval, so the rows agree with each other (the audit log still holds what was approved)."""
    ReleaseRequest.objects.filter(pk=request.pk).update(purpose="something nobody approved")
    digest = manifest.section_digest(ReleaseRequest.objects.get(pk=request.pk))
    ReleaseRequest.objects.filter(pk=request.pk).update(manifest_sha256=digest)
    Approval.objects.filter(request=request).update(manifest_sha256=digest)


def _forge_an_approval(request, context):
    """One officer's approval replaced by a row for another ethics officer who never approved."""
    first = Approval.objects.filter(request=request).order_by("pk").first()
    Approval.objects.filter(pk=first.pk).delete()
    other = context["team"].both
    Approval.objects.create(study=request.study, request=request, officer=other, officer_name=other.username,
                            approved_at=first.approved_at, manifest_sha256=request.manifest_sha256)


def _add_a_file(item):
    extra = {"path": "meta/extra.json", "bytes": 2, "sha256": "0" * 64}
    return {"files": [*item.files, extra]}


def _change_a_digest(item):
    files = [dict(entry) for entry in item.files]
    files[0]["sha256"] = "f" * 64
    return {"files": files}


CHANGES = {
    # The release section: every field of it.
    "purpose": _request("purpose", lambda request, context: request.purpose + " and advertising"),
    "requester's name": _request("requested_by_name", lambda request, context: "someone-else"),
    "study code": _request("study_code", lambda request, context: "other-study"),
    "release number": _request("number", lambda request, context: 99),
    "requested at": _request("created_at", lambda request, context: request.created_at - timedelta(days=1)),
    "supersedes": _request("supersedes_id", lambda request, context: context["other"].pk),
    "episode index": _item(lambda item: {"episode_index": item.episode_index + 100}),
    "capture id": _item(lambda item: {"capture_id": item.capture_id + "-x"}),
    "receipt digest": _item(lambda item: {"receipt_sha256": "e" * 64}),
    "a file entry removed": _item(lambda item: {"files": item.files[:-1]}),
    "a file entry added": _item(_add_a_file),
    "a file digest changed": _item(_change_a_digest),
    "an episode removed": lambda request, context: ReleaseItem.objects.filter(request=request).order_by(
        "episode_index").last().delete(),
    # The approvals: the digests, the officers' names and times, their number.
    "the request's digest": _request("manifest_sha256", lambda request, context: "a" * 64),
    "an approval's digest": _approval("manifest_sha256", lambda approval: "b" * 64),
    "an officer's name": _approval("officer_name", lambda approval: "someone-else"),
    "an approval's time": _approval("approved_at", lambda approval: approval.approved_at - timedelta(days=3)),
    "an approval removed": lambda request, context: Approval.objects.filter(request=request).order_by(
        "pk").first().delete(),
    "an approval forged": _forge_an_approval,
    "every digest rewritten to match": _rewrite_every_digest,
    "the number of approvals needed lowered, one removed": lambda request, context: (
        ReleaseRequest.objects.filter(pk=request.pk).update(approvals_required=1),
        Approval.objects.filter(request=request).order_by("pk").first().delete()),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_a_change_after_the_final_approval_fails_the_release_visibly_and_publishes_nothing(approved, team, verified,
                                                                                           make_request, what):
    context = {"team": team}
    if what == "supersedes":
        context["other"] = make_request(verified(1), submit=False)
    with scope(study=team.study):
        CHANGES[what](approved, context)

    publish_now(approved)
    failed = load(approved)
    assert failed.state == State.FAILED
    assert "not what the ethics officers approved" in failed.reason
    assert storage.walk(storages["releases"], f"releases/{team.study.code}/") == []
    with scope(study=team.study):
        assert bytes(failed.release.manifest) == b""
        alerts = list(Alert.objects.filter(kind=Alert.Kind.RELEASE_INTEGRITY))
    assert len(alerts) == 1 and alerts[0].unresolved and failed.release_id in alerts[0].message
    event = AuditEvent.objects.get(action="release.integrity_failed", target_id=str(approved.pk))
    assert event.after["problems"]
    assert not AuditEvent.objects.filter(action__in=["release.signed", "release.published"]).exists()


def test_without_a_change_the_same_request_is_released(approved):
    """The control of the test above: the approved request, untouched, is signed and published."""
    publish_now(approved)
    assert load(approved).state == State.RELEASED
    assert not AuditEvent.objects.filter(action="release.integrity_failed").exists()


def test_a_change_between_signing_and_publishing_fails_the_release_and_removes_what_was_stored(approved, team,
                                                                                              monkeypatch, client):
    """The check runs again under the request's lock just before the request is marked released."""
    sign_once = publish._sign_once

    def sign_then_change(request, *args, **kwargs):
        signed = sign_once(request, *args, **kwargs)
        ReleaseRequest.objects.filter(pk=request.pk).update(purpose="changed after signing")
        return signed

    monkeypatch.setattr(publish, "_sign_once", sign_then_change)
    publish_now(approved)
    failed = load(approved)
    assert failed.state == State.FAILED and "not what the ethics officers approved" in failed.reason
    assert storage.walk(storages["releases"], approved.prefix) == []

    # The study's stewards see it: the alert's page and the request's page say why.
    with scope(study=team.study):
        alert = Alert.objects.get(kind=Alert.Kind.RELEASE_INTEGRITY)
    client.force_login(team.reg.coordinator)
    page = client.get(reverse("alert-detail", args=[team.study.code, alert.pk])).content.decode()
    assert "release-0001" in page and "not what the ethics officers approved" in page
    page = client.get(reverse("release-detail", args=[team.study.code, approved.number])).content.decode()
    assert "not what the ethics officers approved" in page


def test_the_approval_event_records_the_frozen_name_and_time(approved):
    with scope(study=approved.study):
        approvals = list(Approval.objects.filter(request=approved).order_by("pk"))
    events = list(AuditEvent.objects.filter(action="release.approval_given", target_id=str(approved.pk))
                  .order_by("seq"))
    assert [(e.after["officer"], e.after["approved_at"]) for e in events] == [
        (a.officer_name, rfc3339(a.approved_at)) for a in approvals]
