"""Verification: re-hash a stored shard, streamed from storage, against its receipt; a mismatch raises an
alert for the study's ethics officers. The first verification moves the recording to ``verified``."""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone
from django_scopes import scopes_disabled

from exporter.receipt import RECEIPT
from portal.audit.services import record
from portal.core import queue, storage
from portal.recordings.models import Alert, Episode, Recording, Verification
from portal.recordings.services.history import note, set_state
from portal.recordings.signals import episode_verified


def _problems(episode: Episode) -> list[str]:
    shards = storage.shards()
    problems = []
    receipt_name = episode.prefix + RECEIPT
    receipt_sha, artefacts = None, {}
    try:
        receipt_sha, _ = storage.digest(shards, receipt_name)
        with shards.open(receipt_name, "rb") as stream:
            artefacts = {a["path"]: a for a in json.loads(stream.read())["artefacts"]}
    except FileNotFoundError:
        problems.append(f"{RECEIPT}: missing")
    except (ValueError, KeyError, TypeError) as exc:
        problems.append(f"{RECEIPT}: unreadable ({exc!r})")
    if receipt_sha is not None and receipt_sha != episode.receipt_sha256:
        problems.append(f"{RECEIPT}: SHA-256 {receipt_sha} differs from the one recorded at export")
    present = {name[len(episode.prefix):] for name in storage.walk(shards, episode.prefix)} - {RECEIPT}
    for name in sorted(present - artefacts.keys()):
        problems.append(f"{name}: extra object not in the receipt")
    for name, artefact in sorted(artefacts.items()):
        if name not in present:
            problems.append(f"{name}: missing")
            continue
        sha, size = storage.digest(shards, episode.prefix + name)
        if size != artefact["bytes"]:
            problems.append(f"{name}: {size} bytes, receipt says {artefact['bytes']}")
        if sha != artefact["sha256"]:
            problems.append(f"{name}: SHA-256 {sha} does not match the receipt")
    return problems


def verify_episode(episode: Episode) -> Verification:
    """Re-hash a stored shard (streamed from storage) against its receipt; a mismatch raises an alert."""
    problems = _problems(episode)
    with transaction.atomic():
        now = timezone.now()
        result = Verification.objects.create(study=episode.study, episode=episode, checked_at=now,
                                             ok=not problems, problems=problems)
        before = episode.receipt_status
        episode.receipt_status = Episode.Receipt.MISMATCH if problems else Episode.Receipt.VERIFIED
        episode.verified_at = now
        episode.save(update_fields=["receipt_status", "verified_at"])
        record(None, "episode.verified" if not problems else "episode.verification_failed", episode,
               before={"receipt_status": before}, after={"receipt_status": episode.receipt_status,
                                                         "problems": problems})
        recording = Recording.objects.select_for_update().get(pk=episode.recording_id)
        if problems:
            Alert.objects.create(study=episode.study, episode=episode,
                                 message=f"{episode.prefix}: shard does not match its receipt: "
                                         + "; ".join(problems[:5]))
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
