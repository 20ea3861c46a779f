"""Redacted release shards: under the ``redact`` face policy, the release job publishes for each episode a derived
shard whose video has every face box filled (``exporter.redact.redact_shard``), never the original video.

The derived shard is made in a scratch folder from the verified shard (every file fetched and checked against the
frozen digests) and ``merged_boxes(episode)``, verified, and stored in the shards storage under
``redacted/<release uid>/episode-NNNNNN/`` (its receipt last). A re-run of a killed job finds it there, checks it
against its own receipt, and reuses it; one not whole is made again. ``created_at`` is the release's approval
time, so the same boxes give the same bytes. The release then copies it like any shard.

The release manifest lists the derived files outside the section the officers approved (``redacted_episodes``:
the derived receipt, the original's, the files and the redaction's facts), as it lists the card files.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exporter.layout import episode_folder
from exporter.receipt import RECEIPT, bytes_digest, read_artefacts, verify_shard
from exporter.redact import REDACTION, RedactionError, redact_shard
from exporter.release import read_manifest
from portal.core import storage
from portal.core.storage import ObjectMismatch
from portal.faces.models import FaceRemoval, FaceSpan
from portal.faces.services import review as faces_review
from portal.faces.services.detection import current_detector_id
from portal.releases.models import Release, ReleaseItem, ReleaseRequest

PREFIX = "redacted/"


def applies(release: ReleaseRequest) -> bool:
    """Whether the release publishes redacted shards: its face policy (the study's when requested) is ``redact``."""
    return release.face_policy == "redact"


def redactable(release: ReleaseRequest, item: ReleaseItem) -> bool:
    """Whether ``item`` is published as a derived shard: the release redacts and the episode has a video (one
    without has no face to hide and is published as it is)."""
    return applies(release) and any(entry["path"].endswith(".mp4") for entry in item.files)


def box_mismatches(release: ReleaseRequest) -> list[str]:
    """Under the redact policy, why the boxes the derived shards would fill are not the ones the audit log recorded
    the detector storing and the officers adding, removing and reviewing (``faces_review.audit_mismatches``); the
    release is then refused as one that is not what was approved."""
    if not applies(release):
        return []
    return [problem for item in release.items.select_related("episode__study").order_by("episode_index")
            if redactable(release, item) for problem in faces_review.audit_mismatches(item.episode)]


def release_prefix(release: ReleaseRequest) -> str:
    """Where the derived shards of a release are kept in the shards storage (one folder per episode inside)."""
    return f"{PREFIX}{release.uid}/"


def derived_prefix(release: ReleaseRequest, item: ReleaseItem) -> str:
    return f"{PREFIX}{release.uid}/{item.folder}/"


def _files(shard: Path) -> list[dict[str, Any]]:
    """The shard's files as a release item lists them (``path``, ``bytes``, ``sha256``), its receipt included."""
    data = (shard / RECEIPT).read_bytes()
    listed = [{"path": path, "bytes": entry["bytes"], "sha256": entry["sha256"]}
              for path, entry in sorted(read_artefacts(data).items())]
    sha256, size = bytes_digest(data)
    return sorted([*listed, {"path": RECEIPT, "bytes": size, "sha256": sha256}], key=lambda f: f["path"])


def _record(item: ReleaseItem) -> dict[str, Any]:
    """What ``ceres/redaction.json`` records beside the boxes: the detector and the officers' review."""
    episode = item.episode
    detector_id = current_detector_id()
    detection = faces_review.current_detection(episode, detector_id)
    found = faces_review.load(detection) if detection is not None else None
    reviewed = faces_review.reviewed(episode, detector_id)
    return {
        "detector": found.detector if found else None,
        "detector_id": detector_id,
        "detector_version": found.version if found else None,
        "weights_sha256": found.weights_sha256 if found else None,
        "threshold": found.threshold if found else None,
        "officer_added": [{"keyframes": span.keyframes, "added_by": span.added_by.username}
                          for span in FaceSpan.objects.filter(episode=episode, removed_at__isnull=True)
                          .select_related("added_by").order_by("pk")],
        "officer_removed": [{"frame": removal.frame, "index": removal.index, "box": removal.box,
                             "removed_by": removal.removed_by.username}
                            for removal in FaceRemoval.objects.filter(episode=episode, detector_id=detector_id)
                            .select_related("removed_by").order_by("frame", "index")],
        "reviewed_by": reviewed.reviewed_by.username if reviewed else None,
        "reviewed_at": reviewed.reviewed_at.isoformat() if reviewed else None,
    }


def _stored(shards, prefix: str, scratch: Path) -> list[dict[str, Any]] | None:
    """The derived shard an earlier attempt stored under ``prefix``, whole and matching its receipt; None if not."""
    if not shards.exists(prefix + RECEIPT):
        return None
    local = scratch / "stored"
    storage.fetch(shards, prefix + RECEIPT, local / RECEIPT)
    try:
        files = _files(local)
    except (ValueError, KeyError, TypeError, OSError):
        return None
    for entry in files:
        if entry["path"] != RECEIPT and not storage.matches(shards, prefix + entry["path"], entry["sha256"],
                                                            entry["bytes"]):
            return None
    return files


def derive(release: ReleaseRequest, item: ReleaseItem,
           progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The derived shard of ``item`` in the shards storage (made now, or reused when an earlier attempt stored it
    whole): ``prefix``, ``receipt_sha256``, ``files`` and the ``redaction`` facts the manifest names.
    ``progress(frame, frames)`` is called while the video is re-encoded (redact_shard), in this thread."""
    shards = storage.shards()
    prefix = derived_prefix(release, item)
    with tempfile.TemporaryDirectory(prefix="ceres-redact-") as scratch:
        root = Path(scratch)
        files = _stored(shards, prefix, root)
        if files is None:
            storage.delete_prefix(shards, prefix)
            source = root / "source"
            for entry in item.files:
                try:
                    storage.fetch_checked(shards, item.episode.prefix + entry["path"], source / entry["path"],
                                          entry["sha256"], entry["bytes"])
                except ObjectMismatch:
                    raise ObjectMismatch(f"{item.episode.prefix}{entry['path']}: the stored shard does not match "
                                         f"its receipt") from None
            dest = root / "derived"
            try:
                redact_shard(source, dest, faces_review.merged_boxes(item.episode), record=_record(item),
                             created_at=release.decided_at, progress=progress)
            except RedactionError as exc:
                raise ObjectMismatch(f"{item.folder}: the redacted shard could not be made: {exc}") from None
            problems = verify_shard(dest)
            if problems:
                raise ObjectMismatch(f"{item.folder}: the redacted shard does not verify: {problems[0]}")
            files = _files(dest)
            # The receipt last: a shard whose receipt is stored is whole (an attempt killed before is redone).
            for entry in sorted(files, key=lambda f: f["path"] == RECEIPT):
                storage.put_checked(shards, prefix + entry["path"], dest / entry["path"], entry["sha256"],
                                    entry["bytes"])
        redaction_entry = next(f for f in files if f["path"] == REDACTION)
        local = root / "redaction.json"
        storage.fetch_checked(shards, prefix + REDACTION, local, redaction_entry["sha256"], redaction_entry["bytes"])
        facts = json.loads(local.read_bytes())
    receipt = next(f for f in files if f["path"] == RECEIPT)
    return {"prefix": prefix, "receipt_sha256": receipt["sha256"], "files": files,
            "redaction": {key: facts.get(key) for key in (
                "video", "source_video_sha256", "detector", "detector_id", "detector_version", "weights_sha256",
                "threshold", "frames_with_boxes", "boxes", "reviewed_by", "reviewed_at")}
            | {"officer_added": len(facts.get("officer_added") or []),
               "officer_removed": len(facts.get("officer_removed") or [])}}


def original_videos(item: ReleaseItem, derived: dict[str, Any]) -> set[str]:
    """The SHA-256 of the original video a redacted release must not hold (none when no box was filled: the
    derived video is then the original's bytes, with no face to hide)."""
    facts = derived["redaction"]
    return {facts["source_video_sha256"]} if facts.get("boxes") else set()


def manifest_entry(item: ReleaseItem, derived: dict[str, Any]) -> dict[str, Any]:
    """One episode of the manifest's ``redacted_episodes``."""
    return {"episode_index": item.episode_index, "receipt_sha256": derived["receipt_sha256"],
            "original_receipt_sha256": item.receipt_sha256, "files": derived["files"],
            "redaction": derived["redaction"]}


def released_files(release: ReleaseRequest) -> dict[int, tuple[str, list[dict[str, Any]]]]:
    """Of a published release, the episodes published redacted: index → (derived receipt digest, files relative
    to the episode folder), read from the signed manifest the portal kept. Empty for any other release."""
    data = Release.objects.filter(request=release).values_list("manifest", flat=True).first()
    if not data:
        return {}
    manifest = read_manifest(bytes(data))
    found = {}
    for entry in manifest.get("redacted_episodes") or []:
        folder = f"{episode_folder(entry['episode_index'])}/"
        found[entry["episode_index"]] = (entry["receipt_sha256"], [
            {**f, "path": f["path"].removeprefix(folder)} for f in entry["files"]])
    return found
