"""A compact view of an episode shard for reviewing it beside its video: time series of both pinch distances
and the tracking flags, both hands' 25 joints and the head in 2D (front view: x right, y up), the retained
segments, gap rows and where retries were removed (jumps of ``ceres.source_frame_index``).

Long episodes are downsampled to at most ``max_samples`` evenly spaced frames; segments, gaps and removed
retries are always exact. Positions are rounded to the millimetre, distances to a tenth of one.
"""

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from exporter.features import JOINTS, STATE_DIM, STATE_NAMES

MAX_SAMPLES = 2000
INFO, EPISODE_METADATA = "meta/info.json", "ceres/episode-metadata.json"
HANDS = ("left_hand", "right_hand")
SEGMENT_KEYS = ("cycle", "repetition", "take", "task", "outcome", "annotations", "frame_index_from",
                "frame_index_to", "durable_frames", "gap_frames")
# Bones between joints of the WebXR hand (indices into JOINTS): the thumb from the wrist, each finger from
# the wrist through its metacarpal to its tip.
BONES: tuple[tuple[int, int], ...] = (
    (0, 1), (1, 2), (2, 3), (3, 4),
    *((a, b) for base in (5, 10, 15, 20) for a, b in ((0, base), *((base + k, base + k + 1) for k in range(4)))),
)


def _column(table, name: str, width: int | None = None) -> np.ndarray:
    column = table.column(name).combine_chunks()
    if width is None:
        return column.to_numpy(zero_copy_only=False)
    return np.asarray(column.flatten().to_numpy(zero_copy_only=False)).reshape(len(column), width)


def _runs(mask: np.ndarray) -> list[list[int]]:
    """[first, last + 1) frame ranges where ``mask`` holds."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return [[int(a), int(b)] for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True)]


def episode_review(data_parquet: Path, *, fps: int, segments: list[dict[str, Any]],
                   max_samples: int = MAX_SAMPLES) -> dict[str, Any]:
    """The review data of one episode from its data parquet and the segments of its episode metadata."""
    table = pq.read_table(data_parquet, columns=["observation.state", "action", "frame_index",
                                                 "ceres.source_frame_index", "ceres.source_gap"])
    length = table.num_rows
    state = _column(table, "observation.state", STATE_DIM)
    action = _column(table, "action", 2)
    source = _column(table, "ceres.source_frame_index").astype(np.int64)
    gap = _column(table, "ceres.source_gap").astype(bool)
    step = max(1, math.ceil(length / max_samples))
    picks = np.arange(0, length, step)
    index = {name: number for number, name in enumerate(STATE_NAMES)}

    def values(name: str, digits: int) -> list[float]:
        return np.round(state[picks, index[name]].astype(np.float64), digits).tolist()

    hands = {}
    for hand in HANDS:
        columns = [index[f"{hand}.{joint}.position.{axis}"] for joint in JOINTS for axis in "xy"]
        hands[hand] = np.round(state[np.ix_(picks, columns)].astype(np.float64), 3).tolist()
    jumps = np.flatnonzero(np.diff(source) > 1)
    return {
        "fps": fps,
        "length": length,
        "step": step,
        "frames": picks.tolist(),
        "pinch": {hand: np.round(action[picks, number].astype(np.float64), 4).tolist()
                  for number, hand in enumerate(HANDS)},
        "tracked": {part: state[picks, index[f"{part}.tracked"]].astype(np.int8).tolist()
                    for part in ("head", *HANDS)},
        "head": [values("head.position.x", 3), values("head.position.y", 3)],
        "hands": hands,
        "joints": list(JOINTS),
        "bones": [list(bone) for bone in BONES],
        "segments": [{key: segment.get(key) for key in SEGMENT_KEYS} for segment in segments],
        "gaps": _runs(gap),
        "removed": [{"frame": int(at) + 1, "source_frames": int(source[at + 1] - source[at] - 1)} for at in jumps],
    }


def review_files(paths: Iterable[str]) -> list[str]:
    """Of a shard's files (paths within it), the ones ``shard_review`` reads: the data parquet, the info and the
    episode metadata."""
    data = next(path for path in paths if path.startswith("data/") and path.endswith(".parquet"))
    return [data, INFO, EPISODE_METADATA]


def shard_review(shard_dir: Path, *, max_samples: int = MAX_SAMPLES) -> dict[str, Any]:
    """``episode_review`` of an episode shard folder, which needs to hold only its ``review_files``: the rate
    from its info, the segments from its episode metadata."""
    shard_dir = Path(shard_dir)
    info = json.loads((shard_dir / INFO).read_bytes())
    metadata = json.loads((shard_dir / EPISODE_METADATA).read_bytes())
    data = min((shard_dir / "data").rglob("*.parquet"))
    return episode_review(data, fps=info["fps"], segments=metadata.get("segments", []), max_samples=max_samples)
