"""What the review viewer shows of an episode of a request, read from the stored shard (its data parquet,
info and episode metadata), each file checked against the request's frozen digests first."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.core.cache import cache
from django.utils import timezone

from exporter.receipt import file_digest
from exporter.review import review_files, shard_review
from portal.core import storage
from portal.releases.exceptions import ReleaseError
from portal.releases.models import ReleaseItem
from portal.releases.services import redacted

CACHE_SECONDS = 3600


def video_path(item: ReleaseItem) -> str | None:
    """The shard's video (path within the shard), or None for an episode recorded without a camera."""
    return next((entry["path"] for entry in item.files if entry["path"].endswith(".mp4")), None)


def caption(recording, *, headset: bool) -> str:
    """The line under the viewer's video: capture, recording time, designator (and, for the study's own staff,
    the headset)."""
    parts = [recording.capture_id, f"recorded {timezone.localtime(recording.recorded_at):%Y-%m-%d %H:%M}",
             str(recording.demonstrator or "—")]
    if headset:
        parts.append(str(recording.headset or "—"))
    return " · ".join(parts)


def _fetch(item: ReleaseItem, path: str, root: Path, *, released: bool) -> None:
    """A file of the episode's shard: from the shards storage, or (``released``) from the published release's
    copy, which is what researchers are shown (a withdrawal removes it)."""
    files = item.files
    if released:  # a redacted episode's release holds its derived shard
        files = redacted.released_files(item.request).get(item.episode_index, (None, files))[1]
    entry = next(entry for entry in files if entry["path"] == path)
    local = root / path
    if released:
        storage.fetch(storage.releases(), f"{item.request.prefix}{item.folder}/{path}", local)
    else:
        storage.fetch(storage.shards(), item.episode.prefix + path, local)
    if file_digest(local) != (entry["sha256"], entry["bytes"]):
        raise ReleaseError(f"{item.folder}/{path} in storage does not match its receipt; the episode cannot be "
                           f"reviewed")


def episode_review(item: ReleaseItem, *, released: bool = False) -> dict[str, Any]:
    """Series, segments, gaps and removed retries of the episode (``exporter.review``), cached by receipt (the
    same receipt means the same bytes, wherever they are read from)."""
    key = f"ceres-review-{item.receipt_sha256}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="ceres-review-") as scratch:
        root = Path(scratch)
        for path in review_files(entry["path"] for entry in item.files):
            _fetch(item, path, root, released=released)
        result = shard_review(root)
    result["episode"] = item.folder
    cache.set(key, result, CACHE_SECONDS)
    return result
