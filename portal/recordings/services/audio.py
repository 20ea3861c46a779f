"""Raw microphone audio: the decision at ingest (keep encrypted or strip), sealing the kept files, and
purging them by the study's policy, the demonstrator's consent or a withdrawal, with a purge receipt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from exporter.receipt import file_digest
from portal.audit.services import record
from portal.core import storage
from portal.recordings import crypto
from portal.recordings.models import AudioKey, PurgeReceipt, Recording
from portal.recordings.services.history import note, snapshot
from portal.studies.models import ConsentEvent, Demonstrator, Study
from portal.studies.services.consent import is_covered

AUDIO_RETENTION = ConsentEvent.Scope.RAW_AUDIO_RETENTION


def keeps_audio(study: Study, *, consent: bool, quarantined: bool) -> bool:
    """Keep (encrypted) when the policy is not ``discard`` and the demonstrator's consent allows it, or while a
    quarantine is being sorted out (the re-check decides)."""
    if study.audio_policy == Study.AudioPolicy.DISCARD:
        return False
    return consent or quarantined


def seal(recording: Recording, root: Path, files: list[str], scratch: Path) -> list[dict[str, Any]]:
    """Encrypt the raw-audio files of an unpacked source with a new key of the recording's into the captures
    storage (``<prefix>audio/<path>.enc``); the key is stored wrapped by the master key."""
    key = crypto.new_key()
    captures = storage.captures()
    kept = []
    for name in files:
        sealed = scratch / "sealed.enc"
        plain_sha, plain_bytes = file_digest(root / name)
        crypto.encrypt_file(key, root / name, sealed, associated=f"{recording.uid}/{name}".encode())
        target = storage.put(captures, f"{recording.prefix}audio/{name}.enc", sealed)
        kept.append({"path": target, "source": name, "plain_sha256": plain_sha, "plain_bytes": plain_bytes})
    AudioKey.objects.update_or_create(recording=recording, defaults={"study": recording.study,
                                                                     "wrapped_key": crypto.wrap_key(key)})
    return kept


def record_decision(actor, recording: Recording, files: list[str]) -> None:
    """Audit and log what ingest did with the raw audio it found (``recording.audio`` is already set)."""
    if recording.audio == Recording.Audio.ENCRYPTED:
        rule = "kept encrypted"
    elif recording.study.audio_policy == Study.AudioPolicy.DISCARD:
        rule = "stripped at ingest (study policy discard)"
    else:
        rule = "stripped at ingest (consent does not cover raw-audio retention)"
    record(actor, f"recording.audio_{recording.audio}", recording, after={"files": files, "rule": rule})
    note(recording, f"raw audio in {', '.join(files)}: {rule}")


def raw_audio_retained(recording: Recording) -> bool:
    """What the episode metadata says: audio kept encrypted beyond the export (``retain`` or ``retain-days``)."""
    return (recording.audio == Recording.Audio.ENCRYPTED
            and recording.study.audio_policy != Study.AudioPolicy.UNTIL_EXPORT)


def purge_audio(actor, recording: Recording, *, rule: str) -> PurgeReceipt | None:
    """Delete a recording's kept raw audio and destroy its key, leaving a purge receipt."""
    with transaction.atomic():
        recording = Recording.objects.select_for_update(of=("self",), no_key=True).select_related("study").get(
            pk=recording.pk)
        if recording.audio != Recording.Audio.ENCRYPTED:
            return None
        captures = storage.captures()
        purged = []
        for item in recording.audio_objects:
            try:
                sha, size = storage.digest(captures, item["path"])
            except FileNotFoundError:
                sha, size = None, 0
            purged.append({"path": item["path"], "source": item["source"], "sha256": sha, "bytes": size,
                           "plain_sha256": item["plain_sha256"]})
        deleted, _ = AudioKey.objects.filter(recording=recording).delete()
        receipt = PurgeReceipt.objects.create(study=recording.study, recording=recording, rule=rule,
                                              purged_at=timezone.now(), objects_purged=purged,
                                              key_destroyed=bool(deleted))
        before = snapshot(recording)
        recording.audio = Recording.Audio.PURGED
        recording.audio_objects = []
        recording.save(update_fields=["audio", "audio_objects", "updated_at"])
        record(actor, "recording.audio_purged", recording, before=before,
               after={**snapshot(recording), "rule": rule, "objects": purged})
        note(recording, f"raw audio purged ({rule}); key destroyed")
        # Objects go last: if deleting fails the transaction rolls back and the key is still there to retry.
        for item in purged:
            captures.delete(item["path"])
    return receipt


def purge_due_audio(now: datetime | None = None) -> int:
    """Purge kept audio whose time has come: ``until-export`` after export, ``retain-days N`` N days after
    recording, and any audio the study's policy or the demonstrator's consent no longer allows."""
    now = now or datetime.now(UTC)
    count = 0
    with scopes_disabled():
        candidates = list(Recording.objects.filter(audio=Recording.Audio.ENCRYPTED).select_related("study"))
    for recording in candidates:
        with scope(study=recording.study):
            rule = overdue_purge_rule(recording, now)
            if rule and purge_audio(None, recording, rule=rule):
                count += 1
    return count


def overdue_purge_rule(recording: Recording, now: datetime) -> str | None:
    """The rule by which kept raw audio should be gone by ``now``, or None while it may be kept."""
    study = recording.study
    policy = study.audio_policy
    if policy == Study.AudioPolicy.DISCARD:
        return "discard"
    if policy == Study.AudioPolicy.UNTIL_EXPORT and recording.state in (Recording.State.EXPORTED,
                                                                        Recording.State.VERIFIED):
        return "until-export"
    days = study.audio_retain_days
    if policy == Study.AudioPolicy.RETAIN_DAYS and recording.recorded_at + timedelta(days=days) <= now:
        return f"retain-days {days}"
    if (recording.state != Recording.State.QUARANTINED and recording.demonstrator is not None
            and not is_covered(recording.demonstrator, recording.recorded_on, AUDIO_RETENTION)):
        return "consent does not cover raw-audio retention"
    return None


def purge_for_withdrawal(demonstrator: Demonstrator) -> int:
    """Consent withdrawn: the demonstrator's kept raw audio goes at once."""
    count = 0
    for recording in Recording.objects.filter(demonstrator=demonstrator, audio=Recording.Audio.ENCRYPTED):
        if purge_audio(None, recording, rule="consent withdrawn"):
            count += 1
    return count
