"""What the review viewer shows of an episode of a request, read from the stored shard (its data parquet,
info and episode metadata), each file checked against the request's frozen digests first."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from django.core.cache import cache

from exporter.receipt import file_digest
from exporter.review import episode_review as review_of_shard
from portal.core import storage
from portal.releases.exceptions import ReleaseError
from portal.releases.models import ReleaseItem

CACHE_SECONDS = 3600
METADATA, INFO = "ceres/episode-metadata.json", "meta/info.json"


def video_path(item: ReleaseItem) -> str | None:
    """The shard's video (path within the shard), or None for an episode recorded without a camera."""
    return next((entry["path"] for entry in item.files if entry["path"].endswith(".mp4")), None)


def _fetch(item: ReleaseItem, path: str, root: Path) -> Path:
    entry = next(entry for entry in item.files if entry["path"] == path)
    local = root / path
    storage.fetch(storage.shards(), item.episode.prefix + path, local)
    if file_digest(local) != (entry["sha256"], entry["bytes"]):
        raise ReleaseError(f"{item.folder}/{path} in storage does not match its receipt; the episode cannot be "
                           f"reviewed")
    return local


def episode_review(item: ReleaseItem) -> dict[str, Any]:
    """Series, segments, gaps and removed retries of the episode (``exporter.review``), cached by receipt."""
    key = f"ceres-review-{item.receipt_sha256}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    data = next(entry["path"] for entry in item.files if entry["path"].startswith("data/"))
    with tempfile.TemporaryDirectory(prefix="ceres-review-") as scratch:
        root = Path(scratch)
        metadata = json.loads(_fetch(item, METADATA, root).read_bytes())
        info = json.loads(_fetch(item, INFO, root).read_bytes())
        result = review_of_shard(_fetch(item, data, root), fps=info["fps"], segments=metadata.get("segments", []))
    result["episode"] = item.folder
    cache.set(key, result, CACHE_SECONDS)
    return result
