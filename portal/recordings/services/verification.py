"""Verification: re-hash a stored shard, streamed from storage, against its receipt; a mismatch raises an
alert for the study's coordinators and ethics officers (``portal.fixity``). The first verification moves the
recording to ``verified``."""

from __future__ import annotations

import io

from django.db import transaction
from django.utils import timezone
from django_scopes import scopes_disabled

from exporter.receipt import RECEIPT, digest_problems, listing_problems, read_artefacts
from portal.audit.services import record
from portal.core import queue, storage
from portal.fixity.services import alerts
from portal.recordings.models import Episode, Recording, Verification
from portal.recordings.services.history import note, set_state
from portal.recordings.signals import episode_verified


def _problems(episode: Episode) -> tuple[list[str], dict[str, dict]]:
    """The stored shard against its receipt (``exporter.receipt``'s rules), each object streamed from storage,
    and the stored receipt against the digest recorded at export; with what each object's read saw
    (``storage.checksums``: SHA-256, MD5, length, the store's ETag; sealed, ``storage.seal``), by its path in
    the shard."""
    shards = storage.shards()
    problems = []
    receipt_name = episode.prefix + RECEIPT
    receipt_sha, artefacts, seen = None, {}, {}
    try:
        held = io.BytesIO()
        seen[RECEIPT] = storage.seal(receipt_name, storage.checksums(shards, receipt_name, copy_to=held))
        receipt_sha = seen[RECEIPT]["sha256"]
        artefacts = read_artefacts(held.getvalue())
    except FileNotFoundError:
        problems.append(f"{RECEIPT}: missing")
    except ValueError as exc:
        problems.append(f"{RECEIPT}: {exc}")
    if receipt_sha is not None and receipt_sha != episode.receipt_sha256:
        problems.append(f"{RECEIPT}: SHA-256 {receipt_sha} differs from the one recorded at export")
    present = {name[len(episode.prefix):] for name in storage.walk(shards, episode.prefix)} - {RECEIPT}
    problems += listing_problems(artefacts, present, noun="object")
    for name in sorted(artefacts.keys() & present):
        seen[name] = storage.seal(episode.prefix + name, storage.checksums(shards, episode.prefix + name))
    digests = {name: (found["sha256"], found["size"]) for name, found in seen.items() if name != RECEIPT}
    return problems + digest_problems(artefacts, digests), seen


def verify_episode(episode: Episode) -> Verification:
    """Re-hash a stored shard (streamed from storage) against its receipt; a mismatch raises an alert."""
    problems, seen = _problems(episode)
    with transaction.atomic():
        now = timezone.now()
        result = Verification.objects.create(study=episode.study, episode=episode, checked_at=now,
                                             ok=not problems, problems=problems)
        before = episode.receipt_status
        episode.receipt_status = Episode.Receipt.MISMATCH if problems else Episode.Receipt.VERIFIED
        episode.verified_at = now
        # What this read saw of each object, kept only when every object matched its receipt: a release copies
        # an object whose ETag is still the MD5 recorded here without reading it again (docs/releases.md).
        episode.stored_checksums = {} if problems else seen
        episode.save(update_fields=["receipt_status", "verified_at", "stored_checksums"])
        record(None, "episode.verified" if not problems else "episode.verification_failed", episode,
               before={"receipt_status": before}, after={"receipt_status": episode.receipt_status,
                                                         "problems": problems})
        recording = Recording.objects.select_for_update(no_key=True).get(pk=episode.recording_id)
        if problems:
            alerts.receipt_mismatch(episode, problems)
            note(recording, f"verification failed: {'; '.join(problems[:5])}", "error")
        elif recording.state == Recording.State.EXPORTED:
            set_state(None, recording, Recording.State.VERIFIED, action="recording.verified",
                      note_text=f"{episode.folder} verified against its receipt")
            episode_verified.send(sender=Episode, episode=episode)
    return result


def reverify_all() -> int:
    """Queue a re-verification of every exported shard (the fixity schedule)."""
    with scopes_disabled():
        ids = list(Episode.objects.filter(exported_at__isnull=False).values_list("pk", flat=True))
    for pk in ids:
        queue.send("recordings.verify_episode", pk)
    return len(ids)
