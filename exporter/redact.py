"""Derived episode shards whose video has boxes (bystanders' faces) filled so they cannot be recovered.

`redact_shard(source, dest, boxes, record=...)` copies a verified episode shard to a new folder in which
the video has every box (enlarged by `MARGIN` each side, clamped to the frame) filled with a solid
colour. Only the GOPs holding a box are decoded, filled and re-encoded (the exporter's smart cut); the
other GOPs' packets are copied. Same frame count, timestamps and resolution. The derived shard gets
`ceres/redaction.json`, a `video.redaction` entry in its episode metadata, updated video statistics and
its own receipt. docs/video.md ("Redacted video") explains the choices.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from exporter.errors import SourceError
from exporter.jsonfile import json_bytes
from exporter.modes import publish_modes
from exporter.receipt import RECEIPT, bytes_digest, file_digest, verify_shard, write_receipt
from exporter.stats import STAT_NAMES
from exporter.timestamps import rfc3339
from exporter.video import redact_video, video_stats

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels of the video frame

# Each box grows by this fraction of its width (height) on the left and right (top and bottom) side.
MARGIN = 0.25
# The fill: neutral grey in the video's own planes (Y, Cb, Cr), about RGB (128, 128, 128) once decoded.
FILL_YUV = (128, 128, 128)
REDACTION = "ceres/redaction.json"
METADATA = "ceres/episode-metadata.json"
RESERVED_KEYS = frozenset({
    "schema", "version", "created_at", "video", "source_receipt_sha256", "source_video_sha256", "fill",
    "frames", "frames_with_boxes", "boxes", "boxes_per_frame", "method", "gops", "gops_copied",
    "gops_reencoded", "frames_reencoded",
})


class RedactionError(SourceError):
    """The boxes, the record or the source shard cannot give a redacted shard; nothing was written."""


@dataclass(frozen=True)
class RedactionResult:
    shard_dir: Path
    receipt_sha256: str
    method: str  # "copy" (no box), "smart-cut" or "re-encode"
    frame_count: int
    frames_with_boxes: int
    frames_reencoded: int
    gops: int
    gops_copied: int
    gops_reencoded: int

    def summary(self) -> str:
        return (f"{self.shard_dir}: {self.frames_with_boxes} of {self.frame_count} frames with boxes; "
                f"{self.method}: {self.gops_reencoded} of {self.gops} GOPs re-encoded "
                f"({self.frames_reencoded} frames), {self.gops_copied} copied; receipt {self.receipt_sha256}")


def fill_rect(box: Box, width: int, height: int) -> tuple[int, int, int, int]:
    """The pixel rectangle [x0, x1) x [y0, y1) a box fills: `MARGIN` added on each side, widened to even
    coordinates (so the half-resolution chroma planes are filled over exactly the same area) and clamped
    to the frame."""
    x0, y0, x1, y1 = box
    mx, my = (x1 - x0) * MARGIN, (y1 - y0) * MARGIN
    left = max(0, 2 * math.floor((x0 - mx) / 2))
    top = max(0, 2 * math.floor((y0 - my) / 2))
    right = min(width, 2 * math.ceil((x1 + mx) / 2))
    bottom = min(height, 2 * math.ceil((y1 + my) / 2))
    return left, top, right, bottom


def _checked_boxes(
    boxes: Mapping[int, Sequence[Box]], frame_count: int, width: int, height: int
) -> dict[int, list[Box]]:
    """The boxes by frame, frames with no box left out; RedactionError naming the first bad entry."""
    checked: dict[int, list[Box]] = {}
    for frame, frame_boxes in boxes.items():
        if isinstance(frame, bool) or not isinstance(frame, int | np.integer):
            raise RedactionError(f"frame {frame!r} is not an integer frame index", path="boxes")
        if not 0 <= frame < frame_count:
            raise RedactionError(f"frame {frame} is beyond the video (frames 0 to {frame_count - 1})", path="boxes")
        for box in frame_boxes:
            where = f"frame {frame}: box {box!r}"
            try:
                x0, y0, x1, y1 = (float(v) for v in box)
            except (TypeError, ValueError):
                raise RedactionError(f"{where} is not four numbers (x0, y0, x1, y1)", path="boxes") from None
            if not all(map(math.isfinite, (x0, y0, x1, y1))):
                raise RedactionError(f"{where} has a coordinate that is not finite", path="boxes")
            if x1 <= x0 or y1 <= y0:
                raise RedactionError(f"{where} is empty or inverted (needs x0 < x1 and y0 < y1)", path="boxes")
            if x1 <= 0 or y1 <= 0 or x0 >= width or y0 >= height:
                raise RedactionError(f"{where} lies wholly outside the {width}x{height} frame", path="boxes")
            checked.setdefault(int(frame), []).append((x0, y0, x1, y1))
    return dict(sorted(checked.items()))


def _filler(rects: dict[int, list[tuple[int, int, int, int]]]):
    def fill(row: int, picture: av.VideoFrame) -> av.VideoFrame:
        width, height = picture.width, picture.height
        data = picture.to_ndarray(format="yuv420p")  # Y rows, then U and V, each (h/2, w/2) flattened
        luma = data[:height]
        chroma = data[height:].reshape(2, height // 2, width // 2)
        for x0, y0, x1, y1 in rects[row]:
            luma[y0:y1, x0:x1] = FILL_YUV[0]
            chroma[0, y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = FILL_YUV[1]
            chroma[1, y0 // 2 : y1 // 2, x0 // 2 : x1 // 2] = FILL_YUV[2]
        filled = av.VideoFrame.from_ndarray(data, format="yuv420p")
        filled.pict_type = av.video.frame.PictureType.NONE
        return filled

    return fill


def _video_file(shard: Path) -> tuple[str, str, dict[str, Any]] | None:
    """The shard's video (path inside the shard), its feature key and the shard's info.json."""
    info = json.loads((shard / "meta" / "info.json").read_text(encoding="utf-8"))
    videos = [key for key, feature in info["features"].items() if feature.get("dtype") == "video"]
    if not videos:
        return None
    episode_index = json.loads((shard / METADATA).read_text(encoding="utf-8"))["episode_index"]
    chunk, file = divmod(episode_index, info["chunks_size"])
    return info["video_path"].format(video_key=videos[0], chunk_index=chunk, file_index=file), videos[0], info


def _update_video_stats(staging: Path, key: str, stats: dict[str, list]) -> None:
    """Put the redacted video's statistics into meta/stats.json and the episodes parquet."""
    path = staging / "meta" / "stats.json"
    all_stats = json.loads(path.read_text(encoding="utf-8"))
    all_stats[key] = stats
    path.write_bytes(json_bytes(all_stats))
    for episodes in sorted((staging / "meta" / "episodes").rglob("*.parquet")):
        table = pq.read_table(episodes)
        for stat in STAT_NAMES:
            name = f"stats/{key}/{stat}"
            field = table.schema.field(name)
            table = table.set_column(
                table.schema.get_field_index(name), field, pa.array([stats[stat]], type=field.type)
            )
        pq.write_table(table, episodes)


def redact_shard(
    source: Path,
    dest: Path,
    boxes: Mapping[int, Sequence[Box]],
    *,
    record: dict[str, Any],
    created_at: datetime | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RedactionResult:
    """Write `dest`, a copy of the episode shard `source` whose video has every box filled.

    `boxes`: frame index -> boxes (x0, y0, x1, y1, pixels, already merged). `record`: facts for
    `ceres/redaction.json` (detector, version, weights digest, threshold, officers' changes, reviewer).
    `created_at` (default now) dates the redaction and the new receipt; the same source, boxes, record
    and `created_at` give a byte-identical shard. `progress(frame, frames)` is called as the video's
    re-encoded frames are written (redact_video), in this thread.
    The shard is staged beside `dest` and renamed into place; on any error nothing is left at `dest`.
    """
    source, dest = Path(source), Path(dest)
    if not isinstance(record, dict) or RESERVED_KEYS & record.keys():
        clash = sorted(RESERVED_KEYS & record.keys()) if isinstance(record, dict) else "not a dict"
        raise RedactionError(f"record cannot be used: {clash}", path="record")
    try:
        json_bytes(record)
    except (TypeError, ValueError) as exc:
        raise RedactionError(f"record is not JSON: {exc}", path="record") from None
    if dest.exists() or dest.is_symlink():
        raise RedactionError("already exists; shards are immutable", path=str(dest))
    if not (source / RECEIPT).is_file():
        raise RedactionError("not an episode shard (no receipt)", path=str(source))
    problems = verify_shard(source)
    if problems:
        raise RedactionError(f"does not verify: {problems[0]}", path=str(source))
    found = _video_file(source)
    if found is None:
        raise RedactionError("the shard has no video to redact", path=str(source))
    video_name, video_key, info = found
    with av.open(str(source / video_name)) as media:
        stream = media.streams.video[0]
        width, height = stream.width, stream.height
    frame_count = info["total_frames"]
    checked = _checked_boxes(boxes, frame_count, width, height)
    rects = {frame: [fill_rect(box, width, height) for box in frame_boxes] for frame, frame_boxes in checked.items()}

    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.staging-", dir=dest.parent))
    try:
        for name in sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()):
            if name not in (RECEIPT, video_name):
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / name, staging / name)
        out_video = staging / video_name
        if rects:
            result = redact_video(source / video_name, info["fps"], out_video, np.array(list(rects)), _filler(rects),
                                  progress=progress)
            method, gops, copied, reencoded, frames = (
                result.method, result.gops, result.gops_copied, result.gops_reencoded, result.frames_reencoded)
            if result.frame_count != frame_count:
                raise RedactionError(f"video has {result.frame_count} frames, info.json says {frame_count}",
                                     path=str(source / video_name))
            _update_video_stats(staging, video_key, video_stats(out_video))
        else:
            out_video.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / video_name, out_video)
            with av.open(str(out_video)) as media:
                gops = sum(1 for p in media.demux(video=0) if p.size and p.is_keyframe)
            method, copied, reencoded, frames = "copy", gops, 0, 0
        created = rfc3339(created_at or datetime.now(UTC))
        source_receipt = (source / RECEIPT).read_bytes()
        redaction = {
            "schema": "ceres-video-redaction",
            "version": 1,
            "created_at": created,
            "video": video_name,
            "source_receipt_sha256": bytes_digest(source_receipt)[0],
            "source_video_sha256": file_digest(source / video_name)[0],
            "fill": {"kind": "solid", "yuv": list(FILL_YUV), "margin": MARGIN},
            **record,
            "frames": frame_count,
            "frames_with_boxes": len(checked),
            "boxes": sum(len(b) for b in checked.values()),
            "boxes_per_frame": [[frame, len(b)] for frame, b in checked.items()],
            "method": method,
            "gops": gops,
            "gops_copied": copied,
            "gops_reencoded": reencoded,
            "frames_reencoded": frames,
        }
        (staging / REDACTION).write_bytes(json_bytes(redaction))
        metadata = json.loads((staging / METADATA).read_text(encoding="utf-8"))
        metadata["video"] = {**(metadata.get("video") or {}), "redaction": REDACTION}
        (staging / METADATA).write_bytes(json_bytes(metadata))
        source_meta = json.loads(source_receipt)
        receipt = write_receipt(staging, episode_id=source_meta["episode_id"],
                                episode_index=source_meta["episode_index"], created_at=created)
        if dest.exists() or dest.is_symlink():
            raise RedactionError("already exists; shards are immutable", path=str(dest))
        publish_modes(staging)
        os.rename(staging, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging)
        raise
    return RedactionResult(
        shard_dir=dest,
        receipt_sha256=bytes_digest(receipt)[0],
        method=method,
        frame_count=frame_count,
        frames_with_boxes=len(checked),
        frames_reencoded=frames,
        gops=gops,
        gops_copied=copied,
        gops_reencoded=reencoded,
    )


def read_boxes(path: Path) -> dict[int, list[Box]]:
    """A boxes file for the command line: a JSON object mapping frame index (a decimal string) to a list
    of [x0, y0, x1, y1] boxes in pixels."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RedactionError(f"unreadable boxes JSON: {exc}", path=str(path)) from None
    if not isinstance(data, dict):
        raise RedactionError("must be a JSON object: frame index -> list of [x0, y0, x1, y1]", path=str(path))
    boxes: dict[int, list[Box]] = {}
    for key, value in data.items():
        if not key.isdecimal():
            raise RedactionError(f"key {key!r} is not a frame index", path=str(path))
        if not isinstance(value, list):
            raise RedactionError(f"frame {key}: not a list of boxes", path=str(path))
        boxes[int(key)] = value
    return boxes


def add_arguments(parser) -> None:
    parser.add_argument("source", type=Path, help="an episode shard (verified first)")
    parser.add_argument("dest", type=Path, help="the derived shard's folder (must not exist)")
    parser.add_argument("--boxes", type=Path, required=True,
                        help='JSON object: frame index -> [[x0, y0, x1, y1], ...] in pixels')
    parser.add_argument("--record", type=Path,
                        help="JSON object of facts for ceres/redaction.json (detector, reviewer, ...)")


def run(args) -> int:
    record: dict[str, Any] = {}
    if args.record:
        try:
            record = json.loads(args.record.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RedactionError(f"unreadable record JSON: {exc}", path=str(args.record)) from None
    result = redact_shard(args.source, args.dest, read_boxes(args.boxes), record=record)
    print(result.summary())
    return 0


__all__ = ["MARGIN", "Box", "RedactionError", "RedactionResult", "fill_rect", "read_boxes", "redact_shard"]
