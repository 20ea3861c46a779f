"""Small hand-written capture sources for exporter tests (camera "none" unless a test adds one)."""

import json
import math
from pathlib import Path
from typing import Any

import pytest

RATE_HZ = 30
T0 = 8123.25  # source clock of slot 0: arbitrary origin, not 0
DEVICE_ID = "cam-DEVICE-ID-7f3a9c"
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64; Quest 3) OculusBrowser/35.1 SECRET-UA"


def slot_time(slot: int) -> float:
    """The recorded t of a slot: nominal time plus a little jitter, so record times differ from nominal."""
    return T0 + slot / RATE_HZ + 0.0007 * (slot % 3)


def nominal_time(slot: int) -> float:
    return T0 + slot / RATE_HZ


def pose(slot: int) -> dict[str, Any]:
    return {"p": [0.1 + slot * 0.01, 1.6, -0.2], "q": [0.0, math.sin(slot / 50), 0.0, math.cos(slot / 50)]}


def joint(slot: int, hand: int, j: int) -> list[float]:
    base = 0.3 * hand + 0.01 * j + 0.001 * slot
    return [base, 1.2 + 0.002 * j, -0.3 - 0.001 * slot, 0.0, 0.0, 0.0, 1.0, 0.005 + 0.0001 * j]


def hand(slot: int, side: int, untracked_joints: tuple[int, ...] = ()) -> dict[str, Any]:
    return {"joints": [None if j in untracked_joints else joint(slot, side, j) for j in range(25)]}


def frame(slot: int, **fields: Any) -> dict[str, Any]:
    record = {
        "type": "frame",
        "slot": slot,
        "t": slot_time(slot),
        "head": pose(slot),
        "left": hand(slot, 0),
        "right": hand(slot, 1),
    }
    record.update(fields)
    return record


def gap(slot: int) -> dict[str, Any]:
    return {"type": "gap", "slot": slot, "t": slot_time(slot)}


def segment(
    start: int,
    end: int,
    task: str,
    outcome: str = "success",
    *,
    cycle: int = 0,
    repetition: int = 0,
    take: int = 0,
    annotations: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "type": "segment",
        "cycle": cycle,
        "repetition": repetition,
        "take": take,
        "task": task,
        "start_slot": start,
        "end_slot": end,
        "outcome": outcome,
        "annotations": annotations if annotations is not None else {},
    }


def manifest(**updates: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema": "ceres-capture-source",
        "version": 1,
        "capture_id": "cap-2026-001",
        "recorded_at": "2026-03-01T10:00:00Z",
        "recorder": {"rate_hz": RATE_HZ},
        "camera": None,
        "capture_device": {
            "headset_model": {"availability": "known", "value": "Quest 3"},
            "os": {"availability": "unknown"},
            "eye_tracking": {"availability": "unavailable"},
            "user_agent": USER_AGENT,
            "nested": {"availability": "known", "value": {"device_id": DEVICE_ID, "build": "74"}},
        },
        "calibration": None,
        "study": {
            "headset_id": "HS-01",
            "demonstrator_id": "",
            "project_id": "P-7",
            "consent_date": "2026-02-01",
            "consent_document_id": "ICF-2026-03",
        },
        "audio": {"microphone_enabled": False},
    }
    data.update(updates)
    return data


def standard_records() -> list[Any]:
    """Idle slots 0-4, a retry over 5-14, a success over 15-29 (explicit gap at 18, missing slot 21,
    untracked left hand at 25, untracked index tip at 26), idle 30-31, a failure over 32-39."""
    records: list[Any] = []
    for slot in range(0, 40):
        if slot == 18:
            records.append(gap(slot))
        elif slot == 21:
            continue
        elif slot == 25:
            records.append(frame(slot, left=None))
        elif slot == 26:
            records.append(frame(slot, right=hand(slot, 1, untracked_joints=(9,)), head=None))
        else:
            records.append(frame(slot))
        if slot == 14:
            records.append(segment(5, 15, "Pick up the red cup", "retry", take=0))
        if slot == 29:
            records.append(
                segment(
                    15, 30, "Pick up the red cup", "success", take=1, annotations={"note": "ok", "device_id": DEVICE_ID}
                )
            )
    records.append(segment(32, 40, "Open the drawer", "failure", repetition=1))
    return records


def write_source(root: Path, records: list[Any], *, data: dict[str, Any] | None = None, tail: str = "\n") -> Path:
    """A capture source folder; records are dicts (dumped as JSON) or raw journal lines (str)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "capture.json").write_text(json.dumps(manifest() if data is None else data), encoding="utf-8")
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    (root / "journal.ndjson").write_text("\n".join(lines) + (tail if lines else ""), encoding="utf-8")
    return root


@pytest.fixture
def source(tmp_path: Path) -> Path:
    return write_source(tmp_path / "source", standard_records())
