"""The release job on the storage: objects copied and checked, the manifest signed last and verifiable with the
published public key alone; a re-run counts what is in place; a bad shard object fails the release visibly."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from botocore.exceptions import ConnectionError as BotoConnectionError
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.core.files.storage import storages
from django.utils import timezone
from django_scopes import scope

from exporter.cli import main as exporter_main
from exporter.release import MANIFEST, SIGNATURE
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.releases.models import Release, ReleaseRequest
from portal.releases.services import publish
from portal.releases.services.approval import approve
from portal.research.services.withdrawals import withdraw_consent

pytestmark = pytest.mark.django_db
State = ReleaseRequest.State


@pytest.fixture
def approved(team, verified, make_request):
    """A request of two episodes approved by two officers."""
    request = make_request(verified(2))
    with scope(study=team.study):
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
    return request


def load(request: ReleaseRequest) -> ReleaseRequest:
    with scope(study=request.study):
        return ReleaseRequest.objects.select_related("release").get(pk=request.pk)


def download(prefix: str, folder: Path) -> Path:
    releases = storages["releases"]
    for name in storage.walk(releases, prefix):
        storage.fetch(releases, name, folder / name[len(prefix):])
    return folder


def publish_now(request: ReleaseRequest):
    with scope(study=request.study):
        return publish.publish_release(request.pk)


def test_a_release_is_copied_checked_signed_and_verifies_with_the_public_key(approved, client, tmp_path, capsys):
    publish_now(approved)
    released = load(approved)
    assert released.state == State.RELEASED
    release = released.release
    assert (release.objects_copied, release.objects_found) == (release.objects_total, 0)
    names = storage.walk(storages["releases"], approved.prefix)
    assert approved.prefix == f"releases/{approved.study.code}/release-0001/"
    assert len(names) == release.objects_total and f"{approved.prefix}{MANIFEST}" in names
    assert f"{approved.prefix}episode-000001/ceres/browser-export-receipt.json" in names

    pem = client.get("/.well-known/ceres-release-key").content  # no sign-in needed
    folder = download(approved.prefix, tmp_path / "release")
    load_pem_public_key(pem).verify((folder / SIGNATURE).read_bytes(), (folder / MANIFEST).read_bytes())
    manifest = json.loads((folder / MANIFEST).read_bytes())
    assert manifest["release"]["release_id"] == "release-0001"
    assert manifest["manifest_sha256"] == approved.manifest_sha256
    assert [a["manifest_sha256"] for a in manifest["approvals"]] == [approved.manifest_sha256] * 2
    assert manifest["audit_chain_head"]["seq"] > 0
    assert manifest["release"]["purpose"] == "policy training"
    key = tmp_path / "ceres-release-key.pem"
    key.write_bytes(pem)
    assert exporter_main(["verify-release", str(folder), "--public-key", str(key)]) == 0

    victim = folder / "episode-000000/meta/info.json"
    victim.write_bytes(victim.read_bytes().replace(b"v3.0", b"v3.1"))
    capsys.readouterr()
    assert exporter_main(["verify-release", str(folder), "--public-key", str(key)]) == 1
    assert capsys.readouterr().out.startswith("problem: episode-000000/meta/info.json: SHA-256 ")

    data = (folder / MANIFEST).read_bytes()
    (folder / MANIFEST).write_bytes(data.replace(b"policy training", b"policy trainin9"))
    assert exporter_main(["verify-release", str(folder), "--public-key", str(key)]) == 1
    assert "release-manifest.json.sig: the signature does not match" in capsys.readouterr().out


@pytest.mark.parametrize("threads", [1, 8])
def test_a_rerun_after_a_storage_outage_counts_objects_in_place_and_duplicates_none(approved, monkeypatch, settings,
                                                                                     threads):
    settings.CERES_RELEASE_THREADS = threads
    copy, put, calls, stored = storage.copy, storage.put_checked, [], []

    def failing_copy(*args, **kwargs):
        calls.append(args[3])
        if len(calls) == 4:
            raise BotoConnectionError(error="the gateway went away")
        found = copy(*args, **kwargs)
        if not found:
            stored.append(args[3])
        return found

    def counted_put(*args, **kwargs):  # the card files, the manifest and its signature
        result = put(*args, **kwargs)
        stored.append(args[1])
        return result

    monkeypatch.setattr(storage, "copy", failing_copy)
    monkeypatch.setattr(storage, "put_checked", counted_put)
    with pytest.raises(BotoConnectionError):
        publish_now(approved)
    stalled = load(approved)
    # Progress counts the copies that finished before the error was seen: on one thread exactly the three before
    # the failing one; side by side, at most those that finished at all. Copies not started yet are dropped (those
    # the pool took up before the error was seen still finish: a hard link takes no time, so there may be several).
    assert stalled.state == State.RELEASING and stalled.release.objects_copied <= len(stored)
    assert len(stored) < stalled.release.objects_total
    if threads == 1:
        assert stalled.release.objects_copied == 3
    assert not storage.walk(storages["releases"], approved.prefix + MANIFEST)
    with scope(study=approved.study):
        publish.note_retry(stalled, BotoConnectionError(error="x"), 2)  # what the task does before retrying

    before = len(stored)
    publish_now(approved)
    released = load(approved)
    assert released.state == State.RELEASED
    assert (released.release.attempts, released.release.objects_found) == (2, before)
    assert len(stored) == released.release.objects_total  # every object stored once: none copied twice
    assert len(storage.walk(storages["releases"], approved.prefix)) == released.release.objects_total
    assert AuditEvent.objects.filter(action="release.published").count() == 1
    assert AuditEvent.objects.filter(action="release.signed").count() == 1


def test_a_released_release_is_never_touched_again(approved):
    publish_now(approved)
    before = {name: storage.digest(storages["releases"], name) for name in
              storage.walk(storages["releases"], approved.prefix)}
    events = AuditEvent.objects.count()
    assert publish_now(approved) is None
    assert AuditEvent.objects.count() == events
    assert {name: storage.digest(storages["releases"], name) for name in before} == before


def test_a_withdrawal_recorded_while_the_objects_are_copied_fails_the_release_and_leaves_nothing(approved, team,
                                                                                                  monkeypatch):
    """Consent is read at the start of an attempt; a withdrawal recorded after that, while the shards are being
    copied, must not end in a published release the withdrawal's reach never saw: the final check under the
    demonstrator's lock fails the release and the copied objects are removed."""
    heartbeat = publish._heartbeat
    withdrawn = []

    def withdraw_after_the_first_object(release, copied, found):
        heartbeat(release, copied, found)
        if not withdrawn:
            with scope(study=team.study):
                withdrawn.append(withdraw_consent(team.reg.coordinator, team.reg.demonstrator,
                                                  withdrawal_date=timezone.localdate(), reason="changed my mind"))

    monkeypatch.setattr(publish, "_heartbeat", withdraw_after_the_first_object)
    publish_now(approved)
    failed = load(approved)
    assert withdrawn and failed.state == State.FAILED
    assert "withdrew consent" in failed.release.last_error
    assert storage.walk(storages["releases"], approved.prefix) == []
    assert not AuditEvent.objects.filter(action="release.published", target_id=str(approved.pk)).exists()


def test_a_shard_object_that_no_longer_matches_fails_the_release_visibly(approved, team, tmp_path,
                                                                       django_capture_on_commit_callbacks, sent_tasks):
    with scope(study=team.study):
        item = approved.items.order_by("episode_index").first()
    name = item.episode.prefix + "meta/info.json"
    original = tmp_path / "info.json"
    storage.fetch(storages["shards"], name, original)
    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(original.read_bytes().replace(b"v3.0", b"v9.9"))
    storage.put(storages["shards"], name, tampered)

    publish_now(approved)
    failed = load(approved)
    assert failed.state == State.FAILED
    assert "meta/info.json" in failed.reason and "does not match its receipt" in failed.reason
    assert MANIFEST not in " ".join(storage.walk(storages["releases"], approved.prefix))

    storage.put(storages["shards"], name, original)
    with scope(study=team.study), django_capture_on_commit_callbacks(execute=True):
        publish.retry_release(team.reg.coordinator, failed)
    assert ("releases.publish_release", (approved.pk,)) in sent_tasks
    publish_now(approved)
    assert load(approved).state == State.RELEASED
    with scope(study=team.study):
        assert Release.objects.get(request=approved).objects_found > 0


@pytest.fixture
def copied_by_recorded_md5(settings, monkeypatch):
    """On the S3 gateway, every shard object with a recorded MD5 copied without a read (the test shards' objects
    are smaller than ``CERES_S3_VERIFIED_COPY_MIN_BYTES``); the names of the shard objects read, and of those copied by
    their recorded MD5."""
    if settings.STORAGE_BACKEND != "s3":
        pytest.skip("needs the S3 gateway: CERES_STORAGE=s3 and infra/swift/start.sh")
    settings.CERES_S3_VERIFIED_COPY_MIN_BYTES = 0
    seen = {"read": [], "verified": []}
    read, verified = storage._read_source, storage._copy_s3_verified

    def reading(source, name, *args, **kwargs):
        seen["read"].append(name)
        return read(source, name, *args, **kwargs)

    def copying(source, name, *args, **kwargs):
        seen["verified"].append(name)
        return verified(source, name, *args, **kwargs)

    monkeypatch.setattr(storage, "_read_source", reading)
    monkeypatch.setattr(storage, "_copy_s3_verified", copying)
    return seen


def shard_objects(request: ReleaseRequest) -> set[str]:
    with scope(study=request.study):
        return {item.episode.prefix + entry["path"] for item in request.items.select_related("episode__study")
                for entry in item.files}


@pytest.mark.s3
def test_a_verified_shard_is_copied_by_the_md5_its_verification_recorded_without_a_read(approved,
                                                                                        copied_by_recorded_md5):
    publish_now(approved)
    assert load(approved).state == State.RELEASED
    assert set(copied_by_recorded_md5["verified"]) == shard_objects(approved)
    assert copied_by_recorded_md5["read"] == []


@pytest.mark.s3
def test_a_shard_object_changed_after_its_verification_is_refused_not_copied(approved, team,
                                                                             copied_by_recorded_md5):
    """Its ETag is no longer the MD5 recorded when verification read it: the gateway refuses the copy
    (``x-amz-copy-source-if-match``) and the release fails naming the object, as a mismatch does."""
    with scope(study=team.study):
        item = approved.items.order_by("episode_index").first()
    name = item.episode.prefix + "meta/info.json"
    held = io.BytesIO()
    original = storage.checksums(storages["shards"], name, copy_to=held)
    storage.put(storages["shards"], name, io.BytesIO(held.getvalue().replace(b"v3.0", b"v9.9")))

    publish_now(approved)
    failed = load(approved)
    assert failed.state == State.FAILED
    assert f"{name}: the stored shard does not match its receipt" in failed.reason
    assert f"not the one verified against its receipt (its ETag is no longer {original['md5']}" in failed.reason
    assert name in copied_by_recorded_md5["verified"] and name not in copied_by_recorded_md5["read"]
    assert f"{approved.prefix}{item.folder}/meta/info.json" not in storage.walk(storages["releases"], approved.prefix)
    assert MANIFEST not in " ".join(storage.walk(storages["releases"], approved.prefix))


@pytest.mark.s3
def test_an_md5_written_into_the_database_does_not_let_a_replaced_object_through(approved, team,
                                                                                 copied_by_recorded_md5):
    """Someone who can write both the shards storage and the database replaces a shard object after its
    verification and records the new bytes' MD5 and ETag under the receipt's SHA-256: without the verification
    job's seal (an HMAC under the portal's secret key) the release does not trust them, reads the object and
    refuses it as not matching its receipt."""
    from portal.recordings.models import Episode

    with scope(study=team.study):
        item = approved.items.order_by("episode_index").select_related("episode").first()
    path = "meta/info.json"
    name = item.episode.prefix + path
    held = io.BytesIO()
    storage.checksums(storages["shards"], name, copy_to=held)
    storage.put(storages["shards"], name, io.BytesIO(held.getvalue().replace(b"v3.0", b"v9.9")))
    replaced = storage.checksums(storages["shards"], name)
    recorded = dict(item.episode.stored_checksums)
    recorded[path] = {**replaced, "sha256": recorded[path]["sha256"], "size": recorded[path]["size"],
                      "seal": recorded[path]["seal"]}  # the old seal kept: it was made for other bytes
    with scope(study=team.study):
        Episode.objects.filter(pk=item.episode.pk).update(stored_checksums=recorded)

    publish_now(approved)
    failed = load(approved)
    assert failed.state == State.FAILED
    assert f"{name}: the stored shard does not match its receipt" in failed.reason
    assert name in copied_by_recorded_md5["read"] and name not in copied_by_recorded_md5["verified"]
    assert f"{approved.prefix}{item.folder}/{path}" not in storage.walk(storages["releases"], approved.prefix)


@pytest.mark.s3
def test_an_episode_verified_before_md5s_were_recorded_is_released_by_reading_its_shard(approved, team,
                                                                                         copied_by_recorded_md5):
    from portal.recordings.models import Episode

    with scope(study=team.study):
        Episode.objects.filter(pk__in=approved.items.values("episode")).update(stored_checksums={})
    publish_now(approved)
    assert load(approved).state == State.RELEASED
    assert copied_by_recorded_md5["verified"] == []
    assert set(copied_by_recorded_md5["read"]) == shard_objects(approved)
