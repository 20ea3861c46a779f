"""The release job: copy an approved request's shards to the ``releases`` storage under
``releases/<study>/<release-id>/episode-NNNNNN/...``, check every object re-read from storage against the
receipt, then write the signed manifest and its signature, last.

Crash-safe and idempotent: an attempt takes a lease on the release; a re-run after a kill or a storage outage
counts the objects already stored with the right digest instead of copying them again, replaces any that are
not right, and signs the manifest once (its bytes are kept, so a re-run uploads the same manifest). The
database says ``released`` only after the listing of the prefix holds exactly the expected objects, each
checked. A released request is never touched again.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.db import transaction
from django.utils import timezone

from exporter.release import MANIFEST, SIGNATURE
from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.core import queue, storage
from portal.releases.exceptions import ObjectMismatch, ReleaseBusy, ReleaseError
from portal.releases.models import Release, ReleaseRequest
from portal.releases.services import manifest
from portal.releases.services.requests import lock_fresh, set_state

State = ReleaseRequest.State


def claim_release(request_id: int) -> ReleaseRequest | None:
    """Take the release lease; None when there is nothing to do (not approved, already released, failed)."""
    with transaction.atomic():
        request = ReleaseRequest.objects.select_for_update(of=("self",)).select_related("study").get(pk=request_id)
        if request.state not in (State.APPROVED, State.RELEASING):
            return None
        now = timezone.now()
        release = Release.objects.select_for_update().filter(request=request).first()
        if release is not None and release.lease_until is not None and release.lease_until > now:
            raise ReleaseBusy((release.lease_until - now).total_seconds())
        if release is None:
            total = sum(len(files) for files in request.items.values_list("files", flat=True)) + 2
            release = Release(study=request.study, request=request, prefix=request.prefix, objects_total=total)
        release.attempts += 1
        release.lease_until = now + timedelta(seconds=settings.CERES_RELEASE_LEASE_SECONDS)
        release.save()
        if request.state == State.APPROVED:
            set_state(None, request, State.RELEASING, action="release.started",
                      after={"prefix": release.prefix, "objects_total": release.objects_total})
        else:
            record(None, "release.resumed", request, after={"attempt": release.attempts,
                                                             "objects_copied_before": release.objects_copied})
        return request


def _heartbeat(release: Release, copied: int, found: int) -> None:
    lease = timezone.now() + timedelta(seconds=settings.CERES_RELEASE_LEASE_SECONDS)
    Release.objects.filter(pk=release.pk).update(objects_copied=copied, objects_found=found, lease_until=lease)


def _matches(target: Storage, name: str, sha256: str, size: int) -> bool:
    try:
        return storage.digest(target, name) == (sha256, size)
    except FileNotFoundError:
        return False


def _place(target: Storage, name: str, sha256: str, size: int, content) -> None:
    """Store ``content`` under ``name`` and check the stored object, re-read, against the digest."""
    storage.put(target, name, content)
    if not _matches(target, name, sha256, size):
        target.delete(name)
        raise ObjectMismatch(f"{name}: the stored copy does not match its receipt")


def publish_release(request_id: int) -> ReleaseRequest | None:
    """Copy, check, sign, check again, and only then mark the request released. An object that does not match
    its receipt, or a shard object gone, fails the release visibly; storage errors propagate (the task retries)."""
    request = claim_release(request_id)
    if request is None:
        return None
    try:
        _publish(request)
    except (ObjectMismatch, FileNotFoundError) as exc:
        fail_release(request, f"release failed: {exc}")
    return request


def _publish(request: ReleaseRequest) -> None:
    release = Release.objects.get(request=request)
    shards, releases = storage.shards(), storage.releases()
    copied = found = 0
    expected = set()
    for item in request.items.select_related("episode__study"):
        for entry in item.files:
            name = f"{release.prefix}{item.folder}/{entry['path']}"
            expected.add(name)
            if _matches(releases, name, entry["sha256"], entry["bytes"]):
                found += 1
            else:
                source = item.episode.prefix + entry["path"]
                with shards.open(source, "rb") as stream:
                    _place(releases, name, entry["sha256"], entry["bytes"], stream)
                if storage.digest(shards, source) != (entry["sha256"], entry["bytes"]):
                    releases.delete(name)
                    raise ObjectMismatch(f"{source}: the stored shard no longer matches its receipt")
            copied += 1
            _heartbeat(release, copied, found)
    data, signature = _sign_once(request)
    for filename, content in ((MANIFEST, data), (SIGNATURE, signature)):
        name = release.prefix + filename
        expected.add(name)
        sha256, size = _digest_bytes(content)
        if _matches(releases, name, sha256, size):
            found += 1
        else:
            _place(releases, name, sha256, size, ContentFile(content))
        copied += 1
        _heartbeat(release, copied, found)
    present = set(storage.walk(releases, release.prefix))
    if present != expected:
        missing, extra = sorted(expected - present), sorted(present - expected)
        raise ObjectMismatch(f"the release prefix does not hold exactly the manifest's objects (missing: "
                             f"{missing[:3]}, extra: {extra[:3]})")
    with transaction.atomic():
        lock_fresh(request)
        release = Release.objects.select_for_update().get(request=request)
        release.finished_at, release.lease_until, release.last_error = timezone.now(), None, ""
        release.save(update_fields=["finished_at", "lease_until", "last_error"])
        set_state(None, request, State.RELEASED, action="release.published", reason="",
                  after={"prefix": release.prefix, "objects": len(expected), "found_in_place": found,
                         "manifest_sha256": release.manifest_sha256, "key_fingerprint": release.key_fingerprint})


def _digest_bytes(content: bytes) -> tuple[str, int]:
    return hashlib.sha256(content).hexdigest(), len(content)


def _sign_once(request: ReleaseRequest) -> tuple[bytes, bytes]:
    """The manifest's bytes and signature: made and kept on the first attempt that gets this far."""
    with transaction.atomic():
        release = Release.objects.select_for_update().get(request=request)
        if release.manifest:
            return bytes(release.manifest), bytes(release.signature)
        now = timezone.now()
        data, signature = manifest.signed_manifest(request, released_at=now)
        release.manifest, release.signature = data, signature
        release.manifest_sha256 = _digest_bytes(data)[0]
        release.key_fingerprint = manifest.key_fingerprint()
        release.signed_at = now
        release.save(update_fields=["manifest", "signature", "manifest_sha256", "key_fingerprint", "signed_at"])
        record(None, "release.signed", request, after={"manifest_sha256": release.manifest_sha256,
                                                        "key_fingerprint": release.key_fingerprint})
    return data, signature


def note_retry(request: ReleaseRequest, exc: BaseException, countdown: float) -> None:
    """A transient storage error: the lease is given back and the task retries after ``countdown`` seconds."""
    Release.objects.filter(request=request).update(
        lease_until=None, last_error=f"storage error, retrying in {countdown:.0f} s: {exc}")


def fail_release(request: ReleaseRequest, reason: str) -> None:
    """The release job gave up: the request shows why; a coordinator or ethics officer may retry it."""
    with transaction.atomic():
        lock_fresh(request)
        Release.objects.filter(request=request).update(lease_until=None, last_error=reason)
        if request.can_move_to(State.FAILED):
            set_state(None, request, State.FAILED, action="release.failed", reason=reason)


def retry_release(actor, request: ReleaseRequest) -> ReleaseRequest:
    """Queue a failed release again; objects already in place are kept and counted, not copied again."""
    study = request.study
    if not (has_role(actor, study, Role.COORDINATOR) or has_role(actor, study, Role.ETHICS_OFFICER)):
        raise ReleaseError(f"only a coordinator or ethics officer of study {study.code} can retry a release")
    with transaction.atomic():
        lock_fresh(request)
        if request.state != State.FAILED:
            raise ReleaseError(f"only a failed release can be retried; {request.release_id} is "
                               f"{request.get_state_display().lower()}")
        set_state(actor, request, State.RELEASING, action="release.retried", reason="")
        queue.enqueue("releases.publish_release", request.pk)
    return request
