"""Face detections of one episode video, and their compact file (Parquet) kept beside the shard.

One row per detected box: the frame index, the box (x0, y0, x1, y1 in pixels of the video frame) and the
detector's score. Frames without a face have no row. The detector's name, version, weights digest and
threshold, the frame size and the frame count go into the schema's key-value metadata (``ceres.faces.*``),
so the file says which detector produced it and for which video.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels

FORMAT_VERSION = "1"
META_PREFIX = "ceres.faces."
META_KEYS = ("format", "detector", "version", "weights_sha256", "threshold", "width", "height", "frame_count")
COLUMNS = ("frame", "x0", "y0", "x1", "y1", "score")
MAX_FILE_BYTES = 512 * 1024 * 1024  # a 10-hour episode with 10 faces in every frame is far below this
MAX_DIMENSION = 16384
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")

_SCHEMA = pa.schema(
    [
        pa.field("frame", pa.int32(), nullable=False),
        pa.field("x0", pa.float32(), nullable=False),
        pa.field("y0", pa.float32(), nullable=False),
        pa.field("x1", pa.float32(), nullable=False),
        pa.field("y1", pa.float32(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
    ]
)


@dataclass(frozen=True)
class Detections:
    detector: str
    version: str
    weights_sha256: str
    threshold: float
    width: int
    height: int
    frame_count: int
    frames: np.ndarray  # int32, (n,), non-decreasing
    boxes: np.ndarray  # float32, (n, 4): x0, y0, x1, y1 in pixels
    scores: np.ndarray  # float32, (n,)

    def __post_init__(self) -> None:
        _check(self)

    def by_frame(self) -> dict[int, list[Box]]:
        """Frame index -> the boxes detected in it (frames without a face are absent)."""
        out: dict[int, list[Box]] = {}
        for frame, box in zip(self.frames.tolist(), self.boxes.tolist(), strict=True):
            out.setdefault(frame, []).append(tuple(box))
        return out


def _check(d: Detections) -> None:
    """Every field in range; raises ValueError naming the first that is not."""
    if not isinstance(d.detector, str) or not _NAME.fullmatch(d.detector):
        raise ValueError(f"detections: detector name {d.detector!r} is not a short name")
    if not isinstance(d.version, str) or not _NAME.fullmatch(d.version):
        raise ValueError(f"detections: detector version {d.version!r} is not a short version string")
    if not isinstance(d.weights_sha256, str) or not _HEX64.fullmatch(d.weights_sha256):
        raise ValueError("detections: weights_sha256 is not 64 lower-case hex digits")
    if not isinstance(d.threshold, float) or not (0.0 < d.threshold < 1.0):
        raise ValueError(f"detections: threshold {d.threshold!r} is not a number between 0 and 1")
    for name in ("width", "height"):
        value = getattr(d, name)
        if not isinstance(value, int) or isinstance(value, bool) or not (1 <= value <= MAX_DIMENSION):
            raise ValueError(f"detections: {name} {value!r} is not a frame size in pixels")
    if not isinstance(d.frame_count, int) or isinstance(d.frame_count, bool) or d.frame_count < 0:
        raise ValueError(f"detections: frame_count {d.frame_count!r} is not a count of frames")
    frames, boxes, scores = d.frames, d.boxes, d.scores
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.int32 and frames.ndim == 1):
        raise ValueError("detections: frames is not a 1-d int32 array")
    n = len(frames)
    if not (isinstance(boxes, np.ndarray) and boxes.dtype == np.float32 and boxes.shape == (n, 4)):
        raise ValueError(f"detections: boxes is not a float32 array of shape ({n}, 4)")
    if not (isinstance(scores, np.ndarray) and scores.dtype == np.float32 and scores.shape == (n,)):
        raise ValueError(f"detections: scores is not a float32 array of shape ({n},)")
    if n == 0:
        return
    if int(frames.min()) < 0 or int(frames.max()) >= d.frame_count:
        raise ValueError(f"detections: a frame index lies outside 0..{d.frame_count - 1}")
    if np.any(np.diff(frames) < 0):
        raise ValueError("detections: frame indices are not in order")
    if not (np.all(np.isfinite(boxes)) and np.all(np.isfinite(scores))):
        raise ValueError("detections: a box or score is not a finite number")
    x0, y0, x1, y1 = boxes.T
    if np.any(x0 < 0) or np.any(y0 < 0) or np.any(x1 > d.width) or np.any(y1 > d.height):
        raise ValueError(f"detections: a box lies outside the {d.width}x{d.height} frame")
    if np.any(x1 <= x0) or np.any(y1 <= y0):
        raise ValueError("detections: a box has no area (x1 <= x0 or y1 <= y0)")
    if np.any(scores < 0) or np.any(scores > 1):
        raise ValueError("detections: a score lies outside 0..1")


def empty(
    *, detector: str, version: str, weights_sha256: str, threshold: float, width: int, height: int, frame_count: int
) -> Detections:
    return Detections(
        detector=detector,
        version=version,
        weights_sha256=weights_sha256,
        threshold=threshold,
        width=width,
        height=height,
        frame_count=frame_count,
        frames=np.zeros(0, np.int32),
        boxes=np.zeros((0, 4), np.float32),
        scores=np.zeros(0, np.float32),
    )


def write_detections(d: Detections) -> bytes:
    """The detections as a Parquet file's bytes (zstd, one row group per million rows)."""
    _check(d)
    meta = {
        "format": FORMAT_VERSION,
        "detector": d.detector,
        "version": d.version,
        "weights_sha256": d.weights_sha256,
        "threshold": repr(d.threshold),
        "width": str(d.width),
        "height": str(d.height),
        "frame_count": str(d.frame_count),
    }
    schema = _SCHEMA.with_metadata({(META_PREFIX + k).encode(): v.encode() for k, v in meta.items()})
    table = pa.Table.from_arrays(
        [
            pa.array(d.frames, pa.int32()),
            pa.array(d.boxes[:, 0], pa.float32()),
            pa.array(d.boxes[:, 1], pa.float32()),
            pa.array(d.boxes[:, 2], pa.float32()),
            pa.array(d.boxes[:, 3], pa.float32()),
            pa.array(d.scores, pa.float32()),
        ],
        schema=schema,
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=1_000_000, write_statistics=False)
    return sink.getvalue()


def _int_field(meta: dict[str, str], key: str) -> int:
    text = meta[key]
    if not re.fullmatch(r"[0-9]{1,10}", text):
        raise ValueError(f"detections file: metadata {META_PREFIX}{key} {text!r} is not a whole number")
    return int(text)


def read_detections(data: bytes) -> Detections:
    """Parse a detections file written by write_detections; anything else raises ValueError naming the fault."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValueError("detections file: expected bytes")
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"detections file: {len(data)} bytes is over the {MAX_FILE_BYTES}-byte limit")
    try:
        parquet = pq.ParquetFile(io.BytesIO(bytes(data)))
        schema = parquet.schema_arrow
    except Exception as exc:  # pyarrow raises several types for garbage
        raise ValueError(f"detections file: not a readable Parquet file ({exc.__class__.__name__})") from None
    raw = schema.metadata or {}
    meta: dict[str, str] = {}
    for key, value in raw.items():
        k = key.decode("utf-8", "replace")
        if k.startswith(META_PREFIX):
            try:
                meta[k[len(META_PREFIX) :]] = value.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"detections file: metadata {k} is not UTF-8") from None
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise ValueError(f"detections file: metadata {', '.join(META_PREFIX + k for k in missing)} missing")
    if meta["format"] != FORMAT_VERSION:
        raise ValueError(f"detections file: format {meta['format']!r} is not {FORMAT_VERSION!r}")
    try:
        threshold = float(meta["threshold"])
    except ValueError:
        raise ValueError(f"detections file: metadata {META_PREFIX}threshold is not a number") from None
    if not math.isfinite(threshold):
        raise ValueError(f"detections file: metadata {META_PREFIX}threshold is not finite")
    names = [f.name for f in schema]
    if names != list(COLUMNS):
        raise ValueError(f"detections file: columns {names} are not {list(COLUMNS)}")
    for field in schema:
        wanted = _SCHEMA.field(field.name).type
        if field.type != wanted:
            raise ValueError(f"detections file: column {field.name} is {field.type}, not {wanted}")
    if parquet.metadata.num_rows > MAX_FILE_BYTES // 24:
        raise ValueError("detections file: too many rows")
    try:
        table = parquet.read()
    except Exception as exc:
        raise ValueError(f"detections file: the rows cannot be read ({exc.__class__.__name__})") from None
    if any(table.column(name).null_count for name in COLUMNS):
        raise ValueError("detections file: a column has missing values")
    column = {name: table.column(name).to_numpy() for name in COLUMNS}
    return Detections(
        detector=meta["detector"],
        version=meta["version"],
        weights_sha256=meta["weights_sha256"],
        threshold=threshold,
        width=_int_field(meta, "width"),
        height=_int_field(meta, "height"),
        frame_count=_int_field(meta, "frame_count"),
        frames=column["frame"].astype(np.int32, copy=False),
        boxes=np.stack([column[c] for c in ("x0", "y0", "x1", "y1")], axis=1).astype(np.float32).reshape(-1, 4),
        scores=column["score"].astype(np.float32, copy=False),
    )
