"""The inbox, polled by Celery beat: ``<inbox>/<study code>/<folder or .zip>`` on disk, or the objects
``inbox/<study code>/<name>.zip`` of the captures bucket with S3 storage; each entry is ingested once."""

from __future__ import annotations

import logging
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django_scopes import scope

from portal.audit.services import record
from portal.core import storage
from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path, reject, safe_name
from portal.studies.models import Study

log = logging.getLogger(__name__)


def poll_inbox(min_age_seconds: float = 30.0) -> list[Recording]:
    """Ingest what waits in the inbox. Entries younger than ``min_age_seconds`` are left for the next poll (a
    copy may still be running)."""
    if settings.STORAGE_BACKEND == "s3":
        return _poll_bucket_inbox()
    return _poll_folder_inbox(Path(settings.CERES_INBOX_DIR), min_age_seconds)


def _inbox_study(code: str) -> Study | None:
    return Study.objects.filter(code=code).first()


def _poll_folder_inbox(inbox: Path, min_age_seconds: float) -> list[Recording]:
    ingested = []
    if not inbox.is_dir():
        return ingested
    now = datetime.now(UTC).timestamp()
    for study_dir in sorted(p for p in inbox.iterdir() if p.is_dir() and not p.is_symlink()):
        study = _inbox_study(study_dir.name)
        if study is None:
            log.warning("inbox folder %s names no study", study_dir)
            continue
        claimed = study_dir / ".processing"
        claimed.mkdir(exist_ok=True)
        for entry in sorted(study_dir.iterdir()):
            if entry.name.startswith(".") or now - entry.lstat().st_mtime < min_age_seconds:
                continue
            target = claimed / entry.name
            try:
                entry.rename(target)  # atomic: of two pollers, one wins
            except FileNotFoundError:
                continue
            with scope(study=study):
                ingested.append(ingest_path(None, study, target, via="inbox"))
            _remove(target)
    return ingested


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # removes links inside without following them
    else:
        path.unlink()


def _poll_bucket_inbox() -> list[Recording]:
    captures = storage.captures()
    ingested = []
    try:
        codes, _ = captures.listdir("inbox")
    except FileNotFoundError:
        return ingested
    for code in codes:
        study = _inbox_study(code)
        if study is None:
            continue
        for name in storage.walk(captures, f"inbox/{code}/"):
            with tempfile.TemporaryDirectory(prefix="ceres-inbox-") as scratch, scope(study=study):
                local = Path(scratch) / safe_name(name)
                try:
                    storage.fetch(captures, name, local, max_bytes=settings.CERES_MAX_SOURCE_BYTES)
                except ValueError as exc:
                    captures.delete(name)
                    ingested.append(_reject_unread(study, local.name, str(exc)))
                    continue
                captures.delete(name)
                ingested.append(ingest_path(None, study, local, via="inbox"))
    return ingested


def _reject_unread(study: Study, name: str, reason: str) -> Recording:
    """An inbox object too large to fetch: recorded as received and rejected, so someone sees it happened."""
    with transaction.atomic():
        recording = Recording.objects.create(study=study, via="inbox", original_name=name)
        record(None, "recording.received", recording, after={"via": "inbox", "name": name})
    return reject(None, recording, reason)
