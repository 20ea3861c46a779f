"""The release job: copy an approved request's shards to the ``releases`` storage under
``releases/<study>/<release-id>/episode-NNNNNN/...``, each object proven byte-identical to a shard object that
matches its receipt (``storage.copy``), then write the signed manifest and its signature, last.

Crash-safe and idempotent: an attempt takes a lease on the release; a re-run after a kill or a storage outage
counts the objects already stored and proven right instead of copying them again, replaces any that are
not right, and signs the manifest once (its bytes are kept, so a re-run uploads the same manifest). The
database says ``released`` only after the listing of the prefix holds exactly the expected objects, each
checked. A released request is never touched again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from exporter.cards import CARD_FILES, CardProblem
from exporter.receipt import bytes_digest
from exporter.release import MANIFEST, SIGNATURE
from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.core import leases, queue, signing, storage
from portal.core.states import lock_fresh
from portal.core.storage import ObjectMismatch, SourceMismatch
from portal.fixity.models import Alert
from portal.fixity.services.alerts import raise_alert
from portal.releases.exceptions import ReleaseError
from portal.releases.models import Release, ReleaseRequest
from portal.releases.services import cards, gate, manifest, redacted
from portal.releases.services.release_requests import set_state
from portal.studies.models import Demonstrator

State = ReleaseRequest.State


def claim_release(request_id: int) -> ReleaseRequest | None:
    """Take the release lease; None when there is nothing to do (not approved, already released, failed)."""
    with transaction.atomic():
        release = ReleaseRequest.objects.select_for_update(of=("self",), no_key=True).select_related("study").get(
            pk=request_id)
        if release.state not in (State.APPROVED, State.RELEASING):
            return None
        executed = leases.lock(Release, request=release, missing_ok=True)
        if executed is None:
            items = list(release.items.all())
            # A redacted episode's derived shard holds one file more: ceres/redaction.json.
            total = sum(len(item.files) + redacted.redactable(release, item) for item in items) + 2 + len(CARD_FILES)
            executed = Release(study=release.study, request=release, prefix=release.prefix, objects_total=total)
        leases.take(executed)
        executed.save()
        if release.state == State.APPROVED:
            set_state(None, release, State.RELEASING, action="release.started",
                      after={"prefix": executed.prefix, "objects_total": executed.objects_total})
        else:
            record(None, "release.resumed", release, after={"attempt": executed.attempts,
                                                             "objects_copied_before": executed.objects_copied})
        return release


HEARTBEAT_SECONDS = 0.5


def _heartbeat_every() -> float:
    """How often progress and the lease are written while objects are copied: every HEARTBEAT_SECONDS, or a
    quarter of the lease when that is shorter (the drills' one-second leases)."""
    return min(HEARTBEAT_SECONDS, settings.CERES_RELEASE_LEASE_SECONDS / 4)


def _heartbeat(executed: Release, copied: int, found: int) -> None:
    leases.renew(executed, objects_copied=copied, objects_found=found)


def publish_release(request_id: int) -> ReleaseRequest | None:
    """Copy, check, sign, check again, and only then mark the request released. An object that does not match
    its receipt, or a shard object gone, fails the release visibly; storage errors propagate (the task retries)."""
    release = claim_release(request_id)
    if release is None:
        return None
    try:
        _require_approved(release)
        _require_consent(release)
        _publish(release)
    except NotApproved as exc:
        # Nothing that was not approved stays in the releases storage, not even unsigned, nor a derived shard made
        # from boxes nobody approved.
        storage.delete_prefix(storage.releases(), release.prefix)
        storage.delete_prefix(storage.shards(), redacted.release_prefix(release))
        fail_not_approved(release, exc.problems)
    except ConsentGone as exc:
        # Nothing of a withdrawn person stays in the releases storage, not even in a release never published, and
        # no derived shard made for it (a retry would stop at the same check).
        storage.delete_prefix(storage.releases(), release.prefix)
        storage.delete_prefix(storage.shards(), redacted.release_prefix(release))
        fail_release(release, f"release failed: {exc}")
    except (ObjectMismatch, FileNotFoundError, CardProblem) as exc:
        fail_release(release, f"release failed: {exc}")
    return release


class NotApproved(Exception):
    """What would be signed is not byte for byte what the ethics officers approved."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def _require_approved(release: ReleaseRequest) -> None:
    """The manifest section rebuilt from the request's rows now must have the digest the request was made with and
    every approval names, with as many approvals as the request needs: before copying, at signing and once more
    before the request is marked released. A row changed after the approval (by a database writer) stops it; so do,
    under the redact policy, boxes and reviews in the database that the audit log did not record."""
    problems = manifest.approval_mismatches(release) + redacted.box_mismatches(release)
    if problems:
        raise NotApproved(problems)


class ConsentGone(Exception):
    """An episode of an approved request lost its consent (a withdrawal) before it was released."""


def _require_consent(release: ReleaseRequest, *, lock: bool = False) -> None:
    """A withdrawal between approval and release stops the release: consent and withdrawal are checked again,
    before copying and (``lock``, inside the transaction that marks the request released) once more after the
    demonstrators' rows are locked. A withdrawal locks the same row, so one recorded while the objects were being
    copied is either seen here or commits after the release, whose reach then holds it."""
    items = list(release.items.select_related("episode__recording__demonstrator"))
    if lock:
        people = {item.episode.recording.demonstrator_id for item in items} - {None}
        list(Demonstrator.objects.select_for_update(no_key=True).filter(pk__in=sorted(people)).values_list(
            "pk", flat=True))
    checks = gate.consent_checks([item.episode.recording for item in items])
    failing = [f"{item.folder}: {check.detail}" for item in items for check in checks[item.episode.recording_id]
               if not check.passed]
    if failing:
        raise ConsentGone("; ".join(failing))


def _publish(release: ReleaseRequest) -> None:
    executed = Release.objects.get(request=release)
    shards, releases = storage.shards(), storage.releases()
    # What an earlier attempt left: a listing first, so that an object not there yet is copied without a look.
    # The first attempt (its lease taken once) follows none, so it has nothing to list.
    present = set(storage.walk(releases, executed.prefix)) if executed.attempts != 1 else set()
    items = list(release.items.select_related("episode__study"))
    # Under the redact face policy each episode is published as its derived shard (made, or found whole from an
    # earlier attempt, in the shards storage), never as the original.
    derived = {}
    redacting = [item for item in items if redacted.redactable(release, item)]
    # A long video takes minutes to redact: the lease is renewed, with where the job is, while it is re-encoded.
    beat = leases.Heartbeat(executed, _heartbeat_every())
    for number, item in enumerate(redacting, start=1):
        doing = f"redacting {item.folder} ({number} of {len(redacting)})"
        beat(force=True, progress_note=doing)
        derived[item.pk] = redacted.derive(release, item, progress=lambda frame, frames, doing=doing: beat(
            progress_note=f"{doing}: frame {frame} of {frames}"))
    if redacting:
        beat(force=True, progress_note="")
    copies = [(derived[item.pk]["prefix"] + entry["path"] if item.pk in derived
               else item.episode.prefix + entry["path"], f"{executed.prefix}{item.folder}/{entry['path']}", entry,
               # The MD5 the verification job took of this shard object's bytes as it checked them against this
               # receipt: with it the object is copied without a read (a derived shard has none).
               None if item.pk in derived else storage.verified_copy(
                   (item.episode.stored_checksums or {}).get(entry["path"]), entry["sha256"], entry["bytes"],
                   name=item.episode.prefix + entry["path"]))
              for item in items for entry in (derived[item.pk]["files"] if item.pk in derived else item.files)]
    _refuse_originals(release, items, derived, copies)
    expected = {name for _, name, _, _ in copies}
    # Largest first, so that no large copy starts last and holds up the end.
    copies.sort(key=lambda copy: -copy[2]["bytes"])

    # The shards' metadata the card files are made from (not once the manifest is made: its card files are kept
    # with it), by its path in the release: the bytes a copy read and checked, or read here (``metadata``).
    wanted = {} if executed.manifest else {name[len(executed.prefix):]: (source, entry)
                                           for source, name, entry, _ in copies if entry["path"] in cards.METADATA}
    kept: dict[str, bytes] = {}

    def place(copy: tuple[str, str, dict, str | None]) -> bool:
        """Copy one object unless it is in place already; whether it was. Storage only: runs on the pool."""
        source, name, entry, verified_md5 = copy
        path = name[len(executed.prefix):]
        return _copy(shards, source, releases, name, entry, maybe_present=name in present, verified_md5=verified_md5,
                     keep=(lambda data: kept.__setitem__(path, data)) if path in wanted else None)

    def metadata(pool) -> dict[str, bytes]:
        """The card files' metadata: kept from the copies, the rest read from the shards storage and checked."""
        reads = {path: pool.submit(storage.read_checked, shards, source, entry["sha256"], entry["bytes"])
                 for path, (source, entry) in wanted.items() if path not in kept}
        return {**kept, **{path: read.result() for path, read in reads.items()}}

    copied = found = 0
    # Objects are copied side by side (on S3 by the gateway itself, see ``storage.copy``); progress
    # and the lease are written from this thread, which alone uses the database, at most every
    # HEARTBEAT_SECONDS (each write is a commit: one per object cost more than a small object's copy), and
    # when the copies end or fail. The first error stops the job (the copies not started are dropped, those
    # under way finish) and the task retries.
    written = time.monotonic()
    with ThreadPoolExecutor(max_workers=settings.CERES_RELEASE_THREADS, thread_name_prefix="release") as pool:
        futures = [pool.submit(place, copy) for copy in copies]
        try:
            for future in as_completed(futures):  # progress as copies finish, in whatever order
                found += future.result()
                copied += 1
                if time.monotonic() - written >= _heartbeat_every():
                    _heartbeat(executed, copied, found)
                    written = time.monotonic()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            _heartbeat(executed, copied, found)
            raise
        _heartbeat(executed, copied, found)
        card_files, data, signature = _sign_once(
            release, [redacted.manifest_entry(item, derived[item.pk]) for item in items if item.pk in derived],
            metadata=lambda: metadata(pool))

        def store(filename: str, content: bytes) -> bool:
            """One small file of the release stored and checked unless in place already; whether it was."""
            name = executed.prefix + filename
            sha256, size = bytes_digest(content)
            # Not listed when this attempt began: not there (this attempt holds the lease), so nothing to read.
            if name in present and storage.matches(releases, name, sha256, size):
                return True
            storage.put_checked(releases, name, ContentFile(content), sha256, size)
            return False

        # The card and metadata files side by side, then the manifest that lists them and its signature, last.
        for batch in (card_files.items(), ((MANIFEST, data), (SIGNATURE, signature))):
            batch = list(batch)
            expected.update(executed.prefix + filename for filename, _ in batch)
            for done in [pool.submit(store, filename, content) for filename, content in batch]:
                found += done.result()
                copied += 1
    _heartbeat(executed, copied, found)
    present = set(storage.walk(releases, executed.prefix))
    if present != expected:
        missing, extra = sorted(expected - present), sorted(present - expected)
        raise ObjectMismatch(f"the release prefix does not hold exactly the manifest's objects (missing: "
                             f"{missing[:3]}, extra: {extra[:3]})")
    with transaction.atomic():
        lock_fresh(release)
        _require_approved(release)
        _require_consent(release, lock=True)
        executed = Release.objects.select_for_update(no_key=True).get(request=release)
        executed.finished_at, executed.lease_until, executed.last_error = timezone.now(), None, ""
        executed.save(update_fields=["finished_at", "lease_until", "last_error"])
        set_state(None, release, State.RELEASED, action="release.published", reason="",
                  after={"prefix": executed.prefix, "objects": len(expected), "found_in_place": found,
                         "manifest_sha256": executed.manifest_sha256, "key_fingerprint": executed.key_fingerprint})


def _refuse_originals(release: ReleaseRequest, items, derived: dict, copies) -> None:
    """The storage scan of a redact release: no object it would place in (or finds in) the releases storage is
    an original video whose faces were boxed. ``ObjectMismatch`` (the release fails) naming it."""
    if not redacted.applies(release):
        return
    originals = set().union(*(redacted.original_videos(item, derived[item.pk]) for item in items if item.pk in derived))
    for _, name, entry, _verified_md5 in copies:
        if entry["sha256"] in originals:
            raise ObjectMismatch(f"{name}: an original video with bystanders' faces; the redact policy publishes "
                                 f"only the redacted video")


def _copy(shards, source: str, releases, name: str, entry: dict, *, maybe_present: bool,
          verified_md5: str | None = None, keep=None) -> bool:
    """One shard object into the release, proven byte-identical to the shard object and its receipt
    (``storage.copy``: on S3 copied by the gateway and the copy's ETag checked, the shard read once unless the
    verification job recorded the MD5 of its checked bytes (``verified_md5``) and its ETag is still that; on local
    folders a hard link hashed once); whether it was in place already."""
    try:
        return storage.copy(shards, source, releases, name, entry["sha256"], entry["bytes"],
                            maybe_present=maybe_present, verified_md5=verified_md5, keep=keep)
    except SourceMismatch as exc:
        raise ObjectMismatch(f"{source}: the stored shard does not match its receipt ({exc})") from None


def _sign_once(release: ReleaseRequest, redacted_episodes: list[dict] | None = None, *,
               metadata: Callable[[], dict[str, bytes]]) -> tuple[dict[str, bytes], bytes, bytes]:
    """The card and metadata files, the manifest's bytes and signature: made and kept on the first attempt that
    gets this far (the card files from the shards' metadata, ``metadata()``: each file's bytes by its path in
    the release, checked against the frozen digests)."""
    executed = Release.objects.get(request=release)
    now = timezone.now()
    derived = {entry["episode_index"]: entry["files"] for entry in redacted_episodes or []}
    made = None if executed.manifest else cards.release_cards(release, published=now, metadata=metadata(),
                                                              redacted=derived)
    with transaction.atomic():
        executed = Release.objects.select_for_update(no_key=True).get(request=release)
        if executed.manifest:
            return _kept_cards(executed), bytes(executed.manifest), bytes(executed.signature)
        _require_approved(release)
        made = made if made is not None else cards.release_cards(release, published=now, metadata=metadata(),
                                                                 redacted=derived)
        data, signature = manifest.signed_manifest(release, released_at=now, card_files=made,
                                                   redacted_episodes=redacted_episodes)
        executed.card_files = {name: content.decode("utf-8") for name, content in made.items()}
        executed.manifest, executed.signature = data, signature
        executed.manifest_sha256 = bytes_digest(data)[0]
        executed.key_fingerprint = signing.key_fingerprint()
        executed.signed_at = now
        executed.save(update_fields=["manifest", "signature", "manifest_sha256", "key_fingerprint", "signed_at",
                                     "card_files"])
        record(None, "release.signed", release, after={"manifest_sha256": executed.manifest_sha256,
                                                        "key_fingerprint": executed.key_fingerprint})
    return made, data, signature


def _kept_cards(executed: Release) -> dict[str, bytes]:
    """The card files kept with the manifest (none for a release signed before releases carried them)."""
    return {name: text.encode("utf-8") for name, text in sorted((executed.card_files or {}).items())}


def note_retry(release: ReleaseRequest, exc: BaseException, countdown: float) -> None:
    """A transient storage error: the lease is given back and the task retries after ``countdown`` seconds."""
    leases.give_back(Release.objects.filter(request=release), last_error=leases.retry_note(exc, countdown))


def fail_release(release: ReleaseRequest, reason: str) -> None:
    """The release job gave up: the request shows why; a coordinator or ethics officer may retry it."""
    with transaction.atomic():
        lock_fresh(release)
        leases.give_back(Release.objects.filter(request=release), last_error=reason)
        set_state(None, release, State.FAILED, action="release.failed", reason=reason, if_allowed=True)


def fail_not_approved(release: ReleaseRequest, problems: list[str]) -> None:
    """Refuse to sign what was not approved, visibly: the release fails with the reason, the study's coordinators
    and ethics officers get an alert, and the audit log names each difference."""
    reason = (f"release failed: what would be signed is not what the ethics officers approved ("
              f"{'; '.join(problems)}); nothing was signed or published")
    with transaction.atomic():
        fail_release(release, reason)
        record(None, "release.integrity_failed", release, after={"manifest_sha256": release.manifest_sha256,
                                                                  "problems": problems})
        raise_alert(release.study, kind=Alert.Kind.RELEASE_INTEGRITY,
                    message=f"{release.release_id} of study {release.study.code} was not published: what would be "
                            f"signed is not what the ethics officers approved: {'; '.join(problems)}")


def retry_release(actor, release: ReleaseRequest) -> ReleaseRequest:
    """Queue a failed release again; objects already in place are kept and counted, not copied again."""
    study = release.study
    if not (has_role(actor, study, Role.COORDINATOR) or has_role(actor, study, Role.ETHICS_OFFICER)):
        raise ReleaseError(f"only a coordinator or ethics officer of study {study.code} can retry a release")
    with transaction.atomic():
        lock_fresh(release)
        if release.state != State.FAILED:
            raise ReleaseError(f"only a failed release can be retried; {release.release_id} is "
                               f"{release.get_state_display().lower()}")
        set_state(actor, release, State.RELEASING, action="release.retried", reason="")
        queue.enqueue("releases.publish_release", release.pk)
    return release
