"""Synthetic recorder: writes realistic CERES capture sources (capture-source.md) for tests and benchmarks.

The journal and the camera file are written as they are produced, so an hour-long capture needs no more
memory than a short one. Output is deterministic for a seed.

Camera frames show a moving gradient and a moving block, and carry their own frame number in a band of
black/white cells across the top third of the picture: two rows of eight cells, bit i (least significant
first) in row i // 8, column i % 8; a white cell is a 1. A test can decode a frame and read its number.
With ``bystander`` the camera also shows a bystander's face over the middle half of the frames (``bystander_box``
says where): a photograph bundled with scikit-image, in grey, below the frame-code band, drifting slowly.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import av
import numpy as np

from exporter.errors import SourceError
from exporter.jsonfile import write_json
from exporter.source import check_study_block

if TYPE_CHECKING:
    from exporter.faces.testset import FacePatch

CAMERA_KINDS = ("mp4", "webm", "none")
MICROPHONE_KINDS = ("none", "track", "file")
CAMERA_KEY = "passthrough"
JOURNAL_ORIGIN_S = 8123.4567  # the recorder's monotonic clock has an arbitrary origin
LATE_CAMERA_S = 0.4137  # an unaligned camera starts this long after slot 0
AUDIO_RATE = 48000
FRAME_CODE_BITS = 16
TASKS = (
    "Pick up the red cup",
    "Place the cup on the saucer",
    "Open the top drawer",
    "Pour water into the glass",
    "Fold the towel in half",
    "Press the green button",
)
RAW_CAMERA_DEVICE_ID = "raw-camera-device-7f3a9c2e"
RAW_USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64; Quest 3) AppleWebKit/537.36 (KHTML, like Gecko) "
    "OculusBrowser/37.1 Chrome/126.0 VR Safari/537.36 raw-user-agent-5d1e"
)

# WebXR XRHand joint order; open right hand, fingers along -z, palm down, metres from the wrist.
# Columns: x, y, z, radius. The left hand mirrors x.
RIGHT_HAND_LAYOUT = np.array(
    [
        [0.000, 0.000, 0.000, 0.020],  # wrist
        [-0.025, -0.010, -0.025, 0.016],
        [-0.040, -0.012, -0.045, 0.012],  # thumb metacarpal, proximal
        [-0.050, -0.014, -0.065, 0.010],
        [-0.055, -0.015, -0.085, 0.008],  # thumb distal, tip
        [-0.020, 0.000, -0.030, 0.014],
        [-0.022, 0.000, -0.090, 0.011],
        [-0.023, 0.000, -0.130, 0.009],
        [-0.024, 0.000, -0.155, 0.008],
        [-0.025, 0.000, -0.175, 0.006],  # index
        [0.000, 0.000, -0.030, 0.014],
        [0.000, 0.000, -0.095, 0.011],
        [0.000, 0.000, -0.140, 0.009],
        [0.000, 0.000, -0.168, 0.008],
        [0.000, 0.000, -0.190, 0.006],  # middle
        [0.018, 0.000, -0.028, 0.013],
        [0.018, 0.000, -0.088, 0.010],
        [0.018, 0.000, -0.128, 0.008],
        [0.018, 0.000, -0.153, 0.007],
        [0.018, 0.000, -0.172, 0.006],  # ring
        [0.035, 0.000, -0.025, 0.012],
        [0.035, 0.000, -0.075, 0.009],
        [0.035, 0.000, -0.105, 0.007],
        [0.035, 0.000, -0.125, 0.006],
        [0.035, 0.000, -0.140, 0.005],  # pinky
    ]
)
THUMB_TIP, INDEX_TIP = 4, 9
# Pinching pulls these joints (thumb distal/tip, index distal/tip) toward one point by these fractions.
PINCH_JOINTS = np.array([3, 4, 8, 9])
PINCH_PULL = np.array([0.5, 1.0, 0.5, 1.0])
PINCH_POINT = np.array([-0.045, -0.010, -0.130])


@dataclass(frozen=True)
class Attempt:
    cycle: int
    repetition: int
    take: int
    task: str
    start_slot: int
    end_slot: int
    outcome: str


def generate_capture(
    out_dir: Path,
    *,
    seconds: float = 10.0,
    rate_hz: int = 30,
    seed: int = 0,
    camera: str = "mp4",
    width: int = 160,
    height: int = 120,
    aligned: bool = True,
    retries: int = 1,
    microphone: str = "none",
    zip_output: bool = False,
    capture_id: str | None = None,
    study: dict | None = None,
    recorded_at: datetime | None = None,
    task_spec: bool = True,
    calibration: bool = True,
    bystander: bool = False,
) -> Path:
    """Write one capture source into `out_dir` (a new folder), or into `<out_dir>.zip` with `zip_output`.

    `aligned`: segments tile the recording and the camera has one frame per slot from slot 0 (with
    retries > 0 the camera is aligned except for the retry ranges); otherwise idle slots separate the
    segments and the camera starts late. `study`: the recorder's study block (see `study_block`).
    `bystander`: the camera shows a face over the middle half of its frames (see `bystander_box`).
    `recorded_at` defaults to a fixed time (2026-05-04 09:30 UTC plus `seed` minutes), so the output is
    deterministic; the command line defaults to now. Returns the folder or ZIP path.
    """
    if camera not in CAMERA_KINDS:
        raise ValueError(f"camera must be one of {', '.join(CAMERA_KINDS)}, not {camera!r}")
    if microphone not in MICROPHONE_KINDS:
        raise ValueError(f"microphone must be one of {', '.join(MICROPHONE_KINDS)}, not {microphone!r}")
    if microphone == "track" and camera == "none":
        raise ValueError("microphone='track' needs a camera file to carry the track")
    if camera != "none" and (width < 16 or height < 16 or width % 2 or height % 2):
        raise ValueError("camera width and height must be even and at least 16")
    if bystander and (camera == "none" or height < 96):
        raise ValueError("bystander needs a camera at least 96 pixels high (the face is a third of the height)")
    if not 1 <= rate_hz <= 240 or retries < 0:
        raise ValueError("rate_hz must be 1-240 and retries >= 0")
    out_dir = Path(out_dir)
    final = out_dir.with_name(out_dir.name + ".zip") if zip_output else out_dir
    if final.exists():
        raise FileExistsError(f"{final} already exists")

    rng = np.random.default_rng(seed)
    slot_count = round(seconds * rate_hz)
    attempts = plan_attempts(slot_count, rate_hz, retries, aligned, rng)
    recorded_at = recorded_at or datetime(2026, 5, 4, 9, 30, tzinfo=UTC) + timedelta(minutes=seed)
    capture_id = capture_id or f"synthetic-{seed:04d}"
    camera_file = f"media/camera.{camera}" if camera != "none" else None
    microphone_file = "media/microphone.m4a" if microphone == "file" else None
    first_frame_time = JOURNAL_ORIGIN_S + (0.0 if aligned else LATE_CAMERA_S)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the capture folder is meant to be shared
    try:
        with open(staging / "journal.ndjson", "w", encoding="utf-8") as journal:
            write_journal(journal, slot_count, rate_hz, attempts, rng)
        if camera_file:
            (staging / "media").mkdir()
            frame_count = slot_count if aligned else math.floor((seconds - LATE_CAMERA_S) * rate_hz)
            write_camera(
                staging / camera_file,
                kind=camera,
                frame_count=frame_count,
                rate_hz=rate_hz,
                width=width,
                height=height,
                with_audio=microphone == "track",
                seed=seed,
                bystander=bystander,
            )
        if microphone_file:
            (staging / "media").mkdir(exist_ok=True)
            write_microphone(staging / microphone_file, seconds, seed)
        spec_version = f"1.{seed % 5}.0"
        if task_spec:
            write_json(staging / "task-specification.json", task_specification(attempts, spec_version))
        manifest = capture_manifest(
            capture_id=capture_id,
            recorded_at=recorded_at,
            rate_hz=rate_hz,
            camera_file=camera_file,
            width=width,
            height=height,
            first_frame_time=first_frame_time,
            study=study,
            microphone=microphone,
            microphone_file=microphone_file,
            spec_version=spec_version if task_spec else None,
            calibration=calibration,
            rng=rng,
        )
        write_json(staging / "capture.json", manifest)
        if zip_output:
            archive = staging / "capture.zip"
            _zip_folder(staging, archive, out_dir.name, recorded_at)
            os.replace(archive, final)
        else:
            os.replace(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def study_block(
    *,
    headset_id: str | None = None,
    demonstrator_id: str = "",
    project_id: str | None = None,
    consent_date: date | str | None = None,
    consent_document_id: str | None = None,
) -> dict:
    """The recorder's study block of capture.json (capture-source.md): what it claims about the recording.

    A blank `demonstrator_id` claims no demonstrator: the portal quarantines such a recording until a
    coordinator registers one for it (with a generated designator), records their consent and re-checks it.
    SourceError names a bad value.
    """
    block = {
        "headset_id": headset_id,
        "demonstrator_id": demonstrator_id,
        "project_id": project_id,
        "consent_date": consent_date.isoformat() if isinstance(consent_date, date) else consent_date,
        "consent_document_id": consent_document_id,
    }
    check_study_block(block, "study")
    return block


def plan_attempts(
    slot_count: int, rate_hz: int, retries: int, aligned: bool, rng: np.random.Generator
) -> list[Attempt]:
    """Lay out task attempts over the slots: retained segments, each preceded by its retries."""
    kept = max(2, min(12, slot_count // (3 * rate_hz)))
    takes = [0] * kept
    for i in range(retries):  # the first attempt is kept, so a late camera misses some kept rows
        takes[(kept - 1 - i) % kept] += 1
    total = kept + retries
    lead, idle, tail = (0, 0, 0) if aligned else (round(0.1 * rate_hz), round(0.2 * rate_hz), round(0.1 * rate_hz))
    available = slot_count - lead - tail - idle * (total - 1)
    if available < 4 * total:
        raise ValueError(f"{slot_count} slots are too few for {total} segments; record for longer")
    weights = rng.uniform(0.7, 1.3, total)
    lengths = 4 + np.floor(weights / weights.sum() * (available - 4 * total)).astype(int)
    lengths[-1] = available - lengths[:-1].sum()
    attempts = []
    start = lead
    length_iter = iter(lengths.tolist())
    for index in range(kept):
        task = TASKS[(index * 2 + int(rng.integers(0, len(TASKS)))) % len(TASKS)]
        for take in range(takes[index] + 1):
            end = start + next(length_iter)
            outcome = "retry" if take < takes[index] else ("completed" if index == kept - 1 else "success")
            attempts.append(
                Attempt(
                    cycle=index // 2,
                    repetition=index % 2,
                    take=take,
                    task=task,
                    start_slot=start,
                    end_slot=end,
                    outcome=outcome,
                )
            )
            start = end + idle
    return attempts


def write_journal(
    journal: TextIO, slot_count: int, rate_hz: int, attempts: list[Attempt], rng: np.random.Generator
) -> None:
    """Append one record per slot, as the recorder does, with its tracking losses, gaps and replays."""
    first_kept = next(a for a in attempts if a.outcome != "retry")
    span = first_kept.end_slot - first_kept.start_slot
    forced_gaps = {first_kept.start_slot + span // 3, first_kept.start_slot + span // 3 + 1}
    forced_missing = first_kept.start_slot + 2 * span // 3
    forced_hand_loss = first_kept.start_slot + span // 2
    forced_head_loss = first_kept.start_slot + span // 4
    replay_slot = slot_count // 2
    ends = {a.end_slot - 1: a for a in attempts}
    motion = Motion(rng)
    left_lost = right_lost = head_lost = 0
    recent: list[str] = []
    for slot in range(slot_count):
        nominal = JOURNAL_ORIGIN_S + slot / rate_hz
        t = round(nominal + (rng.uniform(-0.1, 0.1) / rate_hz if slot else 0.0), 6)
        roll = rng.random()
        if slot == forced_hand_loss:
            left_lost = max(left_lost, 6)
        if slot == forced_head_loss:
            head_lost = max(head_lost, 2)
        if slot and (slot == forced_missing or roll < 0.004):
            line = None
        elif slot in forced_gaps or (slot and roll < 0.012):
            line = json.dumps({"type": "gap", "slot": slot, "t": round(nominal, 6)})
        else:
            left_lost = left_lost - 1 if left_lost else int(rng.random() < 0.004) * int(rng.integers(8, 40))
            right_lost = right_lost - 1 if right_lost else int(rng.random() < 0.004) * int(rng.integers(8, 40))
            head_lost = head_lost - 1 if head_lost else int(rng.random() < 0.001) * int(rng.integers(3, 10))
            head, left, right = motion.pose(slot / rate_hz)
            record = {
                "type": "frame",
                "slot": slot,
                "t": t,
                "head": None if head_lost else head,
                "left": None if left_lost else _with_occlusions(left, rng),
                "right": None if right_lost else _with_occlusions(right, rng),
            }
            line = json.dumps(record, separators=(",", ":"))
        if line is not None:
            journal.write(line + "\n")
            recent = [*recent[-2:], line]
        if slot == replay_slot and recent:
            # A recorder restarting after a crash appends its last records again; key order may differ.
            for replayed in recent:
                journal.write(json.dumps(json.loads(replayed), sort_keys=True) + "\n")
        if slot in ends:
            attempt = ends[slot]
            segment = json.dumps(_segment_record(attempt))
            journal.write(segment + "\n")
            if attempt is first_kept:
                journal.write(segment + "\n")


def _segment_record(attempt: Attempt) -> dict:
    annotations: dict = {"note": f"{attempt.outcome} take {attempt.take}", "assisted": attempt.take > 0}
    if attempt.outcome != "retry":
        annotations["difficulty"] = 1 + attempt.repetition
    return {
        "type": "segment",
        "cycle": attempt.cycle,
        "repetition": attempt.repetition,
        "take": attempt.take,
        "task": attempt.task,
        "start_slot": attempt.start_slot,
        "end_slot": attempt.end_slot,
        "outcome": attempt.outcome,
        "annotations": annotations,
    }


def _with_occlusions(hand: dict, rng: np.random.Generator) -> dict:
    if rng.random() < 0.02:
        joints = list(hand["joints"])
        for joint in rng.choice(np.arange(1, 25), size=int(rng.integers(1, 4)), replace=False):
            joints[int(joint)] = None
        return {"joints": joints}
    return hand


class Motion:
    """Smooth head and two-hand trajectories with periodic pinches, as functions of time."""

    def __init__(self, rng: np.random.Generator):
        self.frequencies = rng.uniform(0.08, 0.35, size=(3, 6))  # head, left, right x 6 components
        self.phases = rng.uniform(0, 2 * math.pi, size=(3, 6))
        self.pinch_frequency = rng.uniform(0.2, 0.45, size=2)
        self.pinch_phase = rng.uniform(0, 2 * math.pi, size=2)

    def _waves(self, index: int, time_s: float) -> np.ndarray:
        return np.sin(2 * math.pi * self.frequencies[index] * time_s + self.phases[index])

    def pose(self, time_s: float) -> tuple[dict, dict, dict]:
        head_wave = self._waves(0, time_s)
        head_position = np.array([0.0, 1.62, 0.0]) + 0.05 * head_wave[:3]
        head_rotation = _quaternion_from_euler(0.3 * head_wave[3], 0.15 * head_wave[4], 0.05 * head_wave[5])
        head = {"p": _rounded(head_position), "q": _rounded(head_rotation)}
        hands = []
        for side, sign in ((1, -1.0), (2, 1.0)):  # left hand at -x, right hand at +x
            wave = self._waves(side, time_s)
            wrist = head_position + np.array([0.18 * sign, -0.35, -0.35]) + 0.08 * wave[:3]
            rotation = _quaternion_from_euler(0.4 * wave[3], 0.3 * wave[4] - 0.2, 0.3 * wave[5] + 0.2 * sign)
            pinch_wave = math.sin(2 * math.pi * self.pinch_frequency[side - 1] * time_s + self.pinch_phase[side - 1])
            pinch = min(1.0, max(0.0, 1.6 * pinch_wave))
            local = RIGHT_HAND_LAYOUT[:, :3].copy()
            local[PINCH_JOINTS] += (PINCH_POINT - local[PINCH_JOINTS]) * (pinch * PINCH_PULL)[:, None]
            local[:, 0] *= sign  # mirror the right-hand layout for the left hand
            positions = wrist + local @ _rotation_matrix(rotation).T
            joints = [
                [*_rounded(p), *_rounded(rotation), float(r)]
                for p, r in zip(positions, RIGHT_HAND_LAYOUT[:, 3], strict=True)
            ]
            hands.append({"joints": joints})
        return head, hands[0], hands[1]


def _rounded(values: np.ndarray) -> list[float]:
    return np.round(values, 6).tolist()


def _quaternion_from_euler(yaw: float, pitch: float, roll: float) -> np.ndarray:
    """Unit quaternion [x, y, z, w] of yaw about y, then pitch about x, then roll about z."""
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    q_yaw, q_pitch, q_roll = np.array([0, sy, 0, cy]), np.array([sp, 0, 0, cp]), np.array([0, 0, sr, cr])
    q = _quaternion_product(_quaternion_product(q_yaw, q_pitch), q_roll)
    return q / np.linalg.norm(q)


def _quaternion_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def _rotation_matrix(q: np.ndarray) -> np.ndarray:
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def bystander_frames(frame_count: int) -> range:
    """The camera frames that show the bystander's face: the middle half."""
    return range(frame_count // 4, frame_count - frame_count // 4)


def bystander_box(index: int, width: int, height: int, frame_count: int) -> tuple[float, float, float, float] | None:
    """Where the bystander's face is in camera frame ``index`` (x0, y0, x1, y1 in pixels), or None when the frame
    does not show it. The face is a third of the picture's height tall, below the frame-code band, starting a
    quarter in from the left and drifting right by a pixel every other frame."""
    frames = bystander_frames(frame_count)
    if index not in frames:
        return None
    x, y = _bystander_at(index - frames.start, width, height)
    x0, y0, x1, y1 = _bystander_patch(height).box
    return (x + x0, y + y0, x + x1, y + y1)


def _bystander_at(step: int, width: int, height: int) -> tuple[int, int]:
    patch = _bystander_patch(height)
    ph, pw = patch.rgb.shape[:2]
    x = min(width // 4 + step // 2, width - pw)
    y = height // 3 + max(0, (height - height // 3 - ph) // 2)
    return x, y


@lru_cache(maxsize=4)
def _bystander_patch(height: int) -> FacePatch:
    """The face (scikit-image's astronaut portrait) sized for a picture ``height`` pixels high."""
    from exporter.faces.testset import ASTRONAUT, face_patch

    return face_patch(ASTRONAUT, height // 3, angle=0.0, blur=0.0, brightness=1.0)


class CameraPictures:
    """yuv420p pictures: a drifting gradient, a moving block and the frame-number band; with ``bystander`` (the
    number of frames) a face over the middle half of them."""

    def __init__(self, width: int, height: int, seed: int, bystander: int | None = None):
        self.width, self.height = width, height
        self.seed = seed
        columns = np.arange(width + 256)
        self.luma_ramp = np.tile((columns % 256).astype(np.uint8), (height, 1))
        self.band_height = height // 3
        self.cell_width = width // 8
        self.cell_height = self.band_height // 2
        self.bystander = bystander

    def picture(self, index: int) -> np.ndarray:
        width, height = self.width, self.height
        shift = (index * 3 + self.seed * 17) % 256
        luma = self.luma_ramp[:, shift : shift + width].copy()
        block = max(4, height // 5)
        x = int((width - block) * (0.5 + 0.5 * math.sin(index / 23.0)))
        y = self.band_height + int((height - self.band_height - block) * (0.5 + 0.5 * math.cos(index / 31.0)))
        luma[y : y + block, x : x + block] = 235
        code = index % (1 << FRAME_CODE_BITS)
        for bit in range(FRAME_CODE_BITS):
            row, column = divmod(bit, 8)
            top, left = row * self.cell_height, column * self.cell_width
            luma[top : top + self.cell_height, left : left + self.cell_width] = 255 if code >> bit & 1 else 0
        chroma_u = np.full((height // 2, width // 2), 128 + int(60 * math.sin(index / 40.0)), np.uint8)
        chroma_v = np.full((height // 2, width // 2), 128 + int(60 * math.cos(index / 55.0)), np.uint8)
        chroma_u[: self.band_height // 2] = 128
        chroma_v[: self.band_height // 2] = 128
        if self.bystander is not None and index in bystander_frames(self.bystander):
            self._paste_face(luma, chroma_u, chroma_v, index - bystander_frames(self.bystander).start)
        planes = np.concatenate([luma.ravel(), chroma_u.ravel(), chroma_v.ravel()])
        return planes.reshape(height * 3 // 2, width)

    def _paste_face(self, luma: np.ndarray, chroma_u: np.ndarray, chroma_v: np.ndarray, step: int) -> None:
        patch = _bystander_patch(self.height)
        grey = patch.rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
        x, y = _bystander_at(step, self.width, self.height)
        h, w = grey.shape
        h, w = min(h, self.height - y), min(w, self.width - x)
        alpha = patch.alpha[:h, :w]
        region = luma[y : y + h, x : x + w].astype(np.float32)
        luma[y : y + h, x : x + w] = (grey[:h, :w] * alpha + region * (1 - alpha)).clip(0, 255).astype(np.uint8)
        chroma_u[y // 2 : (y + h) // 2, x // 2 : (x + w) // 2] = 128
        chroma_v[y // 2 : (y + h) // 2, x // 2 : (x + w) // 2] = 128


def read_frame_code(rgb: np.ndarray) -> int:
    """The frame number a generated camera frame carries (see the module docstring)."""
    height, width = rgb.shape[:2]
    cell_height, cell_width = height // 3 // 2, width // 8
    grey = rgb.mean(axis=2)
    code = 0
    for bit in range(FRAME_CODE_BITS):
        row, column = divmod(bit, 8)
        cell = grey[
            row * cell_height + 2 : (row + 1) * cell_height - 2, column * cell_width + 2 : (column + 1) * cell_width - 2
        ]
        code |= int(cell.mean() > 128) << bit
    return code


def write_camera(
    path: Path,
    *,
    kind: str,
    frame_count: int,
    rate_hz: int,
    width: int,
    height: int,
    with_audio: bool,
    seed: int,
    codec: str | None = None,
    bystander: bool = False,
) -> None:
    """Encode `frame_count` frames at `rate_hz` (frame k at k/rate_hz) into an MP4 or WebM file; with `bystander`
    a face over the middle half of them (`bystander_box`)."""
    video_codec = codec or ("libx264" if kind == "mp4" else "libvpx-vp9")
    options = {
        "mp4": {"preset": "ultrafast", "g": str(2 * rate_hz)},
        "webm": {"deadline": "realtime", "cpu-used": "8", "g": str(2 * rate_hz)},
    }[kind]
    if video_codec == "libx265":
        options = {"preset": "ultrafast", "x265-params": "log-level=error"}
    pictures = CameraPictures(width, height, seed, bystander=frame_count if bystander else None)
    with _output(path, "mp4" if kind == "mp4" else "webm") as output:
        # Where a phone would put its position and a device name: the exporter must not copy these.
        output.metadata.update({"title": "CERES passthrough camera", "location": "+52.3676+004.9041/"})
        video = output.add_stream(video_codec, rate=rate_hz, options=options)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.time_base = Fraction(1, rate_hz)
        video.codec_context.time_base = Fraction(1, rate_hz)
        video.metadata["handler_name"] = "CERES passthrough camera"
        audio = _add_audio_stream(output, "aac" if kind == "mp4" else "libopus") if with_audio else None
        tone = Tone(seed)
        for index in range(frame_count):
            frame = av.VideoFrame.from_ndarray(pictures.picture(index), format="yuv420p")
            frame.pts = index
            output.mux(video.encode(frame))
            if audio is not None:
                for audio_frame in tone.frames_until((index + 1) / rate_hz, audio.codec_context.frame_size):
                    output.mux(audio.encode(audio_frame))
        output.mux(video.encode(None))
        if audio is not None:
            output.mux(audio.encode(None))


def write_microphone(path: Path, seconds: float, seed: int) -> None:
    """A lone AAC microphone recording (M4A)."""
    with _output(path, "ipod") as output:
        audio = _add_audio_stream(output, "aac")
        for audio_frame in Tone(seed).frames_until(seconds, audio.codec_context.frame_size):
            output.mux(audio.encode(audio_frame))
        output.mux(audio.encode(None))


def _add_audio_stream(output: av.container.OutputContainer, codec: str) -> av.audio.stream.AudioStream:
    audio = output.add_stream(codec, rate=AUDIO_RATE, layout="mono")
    audio.codec_context.open()  # sets frame_size
    return audio


class Tone:
    """A quiet hum with noise, cut into encoder-sized audio frames."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed + 1)
        self.samples_written = 0

    def frames_until(self, until_s: float, frame_size: int) -> Iterator[av.AudioFrame]:
        while self.samples_written < until_s * AUDIO_RATE:
            time_s = (self.samples_written + np.arange(frame_size)) / AUDIO_RATE
            samples = 0.1 * np.sin(2 * math.pi * 220 * time_s) + 0.01 * self.rng.standard_normal(frame_size)
            frame = av.AudioFrame.from_ndarray(samples.astype(np.float32)[None, :], format="fltp", layout="mono")
            frame.sample_rate = AUDIO_RATE
            frame.pts = self.samples_written
            frame.time_base = Fraction(1, AUDIO_RATE)
            self.samples_written += frame_size
            yield frame


@contextmanager
def _output(path: Path, format_name: str) -> Iterator[av.container.OutputContainer]:
    options = {"fflags": "+bitexact"}
    if format_name in ("mp4", "ipod"):
        options["movflags"] = "+faststart"
    output = av.open(str(path), "w", format=format_name, options=options)
    try:
        yield output
    finally:
        output.close()


def capture_manifest(
    *,
    capture_id: str,
    recorded_at: datetime,
    rate_hz: int,
    camera_file: str | None,
    width: int,
    height: int,
    first_frame_time: float,
    study: dict | None,
    microphone: str,
    microphone_file: str | None,
    spec_version: str | None,
    calibration: bool,
    rng: np.random.Generator,
) -> dict:
    def known(value: object) -> dict:
        return {"availability": "known", "value": value}

    manifest: dict = {
        "schema": "ceres-capture-source",
        "version": 1,
        "capture_id": capture_id,
        "recorded_at": recorded_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "recorder": {"rate_hz": rate_hz, "app_version": "synthetic-1"},
        "camera": None,
        "capture_device": {
            "headset_model": known("Quest 3"),
            "os": known("Horizon OS 74"),
            "browser_engine": known("Chromium 126"),
            "hand_tracking": known("webxr-hand-input"),
            "display_refresh_hz": known(90),
            "eye_tracking": {"availability": "unavailable"},
            "ipd_mm": {"availability": "unknown"},
            "user_agent": RAW_USER_AGENT,
        },
        "calibration": None,
        "study": study,
        "audio": {
            "microphone_enabled": microphone != "none",
            "media": {"none": None, "track": camera_file, "file": microphone_file}[microphone],
        },
        "task_specification": ({"path": "task-specification.json", "version": spec_version} if spec_version else None),
    }
    if camera_file:
        manifest["camera"] = {
            "selected": CAMERA_KEY,
            "media": camera_file,
            "width": width,
            "height": height,
            "frame_rate": rate_hz,
            "first_frame_source_time": first_frame_time,
            "characteristics": {
                "focal_length_mm": known(2.2),
                "field_of_view_deg": known(round(float(rng.uniform(95, 105)), 1)),
                "exposure_mode": {"availability": "unknown"},
                "lens_facing": known("outward"),
                "stabilisation": {"availability": "unavailable"},
            },
            "device_id": RAW_CAMERA_DEVICE_ID,
        }
        if calibration:
            manifest["calibration"] = {
                "model": "pinhole-radtan5",
                "intrinsics": {
                    "fx": round(0.9 * width, 3),
                    "fy": round(0.9 * width, 3),
                    "cx": width / 2 - 0.5,
                    "cy": height / 2 - 0.5,
                },
                "distortion": np.round(rng.normal(0, [0.05, 0.01, 0.001, 0.001, 0.002]), 6).tolist(),
                "rms_error_px": round(float(rng.uniform(0.2, 0.6)), 3),
                "sample_count": int(rng.integers(20, 60)),
                "captured_at": (recorded_at - timedelta(days=2)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
    return manifest


def task_specification(attempts: list[Attempt], version: str) -> dict:
    tasks = list(dict.fromkeys(a.task for a in attempts))
    return {
        "protocol": "Tabletop manipulation — Übung A",
        "version": version,
        "cycles": 1 + max(a.cycle for a in attempts),
        "steps": [{"task": task, "repetitions": 2, "max_seconds": 30.0, "tolerance_m": 1e-05} for task in tasks],
        "notes": "Hold each pose ≥ 1 s; retry freely.",
    }


def _zip_folder(folder: Path, archive: Path, root_name: str, recorded_at: datetime) -> None:
    stamp = recorded_at.astimezone(UTC).timetuple()[:6]
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and p != archive):
            info = zipfile.ZipInfo(f"{root_name}/{path.relative_to(folder).as_posix()}", date_time=stamp)
            info.compress_type = zipfile.ZIP_STORED if path.parent.name == "media" else zipfile.ZIP_DEFLATED
            with open(path, "rb") as source, bundle.open(info, "w") as target:
                shutil.copyfileobj(source, target)


def _recorded_at(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time such as 2026-05-04T09:30:00Z") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone; add Z for UTC or an offset such as +02:00")
    return moment


def _consent_date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Write a synthetic CERES capture source (deterministic for a seed and --recorded-at). The study "
        "options fill capture.json's study block; a capture that should pass the portal's ingest names a "
        "headset and demonstrator registered in the study, whose consent covers the recording time."
    )
    parser.add_argument("out_dir", type=Path, help="capture source folder to create (must not exist)")
    parser.add_argument("--seconds", type=float, default=10.0, help="recording length (default 10)")
    parser.add_argument("--rate-hz", type=int, default=30, help="recorder slot rate (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--recorded-at", type=_recorded_at,
                        help="RFC 3339 time of the first slot, e.g. 2026-05-04T09:30:00Z (default: now)")
    parser.add_argument("--camera", choices=CAMERA_KINDS, default="mp4", help="mp4: H.264+AAC, webm: VP9+Opus")
    parser.add_argument("--width", type=int, default=160, help="camera width, even (default 160)")
    parser.add_argument("--height", type=int, default=120, help="camera height, even (default 120)")
    parser.add_argument(
        "--unaligned",
        dest="aligned",
        action="store_false",
        help="idle slots between segments and a camera that starts late",
    )
    parser.add_argument("--retries", type=int, default=1, help="retry takes before successful ones (default 1)")
    parser.add_argument(
        "--microphone",
        choices=MICROPHONE_KINDS,
        default="none",
        help="track: audio in the camera file, file: media/microphone.m4a",
    )
    parser.add_argument("--zip", dest="zip_output", action="store_true", help="write OUT_DIR.zip instead")
    parser.add_argument("--capture-id", help="default synthetic-<seed>")
    parser.add_argument("--no-task-spec", dest="task_spec", action="store_false", help="no task-specification.json")
    parser.add_argument("--no-calibration", dest="calibration", action="store_false", help="no camera calibration")
    parser.add_argument("--bystander", action="store_true",
                        help="the camera shows a bystander's face over the middle half of the recording")
    study = parser.add_argument_group("study block", "the recorder's claims; without any of these, capture.json "
                                                     "has no study block")
    study.add_argument("--headset-id", help="the study's headset ID")
    study.add_argument("--demonstrator-id", help="a registered designator; blank asks the portal for a new one")
    study.add_argument("--project-id", help="the study's project identifier")
    study.add_argument("--consent-date", type=_consent_date, help="date of the demonstrator's consent, YYYY-MM-DD")
    study.add_argument("--consent-document-id", help="the consent document, e.g. 'ICF-2026-03 v1'")


def _study_from(args: argparse.Namespace) -> dict | None:
    names = ("headset_id", "demonstrator_id", "project_id", "consent_date", "consent_document_id")
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    return study_block(**given) if given else None


def run(args: argparse.Namespace) -> int:
    try:
        path = generate_capture(
            args.out_dir,
            seconds=args.seconds,
            rate_hz=args.rate_hz,
            seed=args.seed,
            camera=args.camera,
            width=args.width,
            height=args.height,
            aligned=args.aligned,
            retries=args.retries,
            microphone=args.microphone,
            zip_output=args.zip_output,
            capture_id=args.capture_id,
            study=_study_from(args),
            recorded_at=args.recorded_at or datetime.now(UTC).replace(microsecond=0),
            task_spec=args.task_spec,
            calibration=args.calibration,
            bystander=args.bystander,
        )
    except (ValueError, FileExistsError, SourceError) as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0
