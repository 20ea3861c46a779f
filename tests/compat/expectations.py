"""Expected frames of a study dataset, read straight from its capture sources' journals.

Prints the JSON that ``lerobot_load.py`` checks against: per episode (in dataset order) the task text,
source slot, observation state (410 values) and action (the two pinch distances) of every row, derived
from the journal's records and retained segments (capture-source.md sections 3 and 4) with plain Python,
without the exporter's help, and the episode's mp4 in its own shard (the frames the assembled dataset
must decode to).

Usage: python tests/compat/expectations.py --camera 160x120 CAPTURE_DIR... --shards SHARD_DIR... > expected.json
"""

import argparse
import json
import math
import sys
from pathlib import Path

JOINTS = 25
JOINT_VALUES = 8  # px, py, pz, qx, qy, qz, qw, radius
THUMB_TIP, INDEX_TIP = 4, 9  # in WebXR XRHand joint order


def journal_records(journal: Path) -> list[dict]:
    """The journal's records in order; a last line that is not JSON is a torn tail and is left out."""
    lines = journal.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break  # torn tail: the recorder lost power mid-append
            raise
    return records


def retained_segments(records: list[dict]) -> list[dict]:
    segments: dict[tuple[int, int, int], dict] = {}
    for record in records:
        if record.get("type") == "segment" and record["outcome"] != "retry":
            segments[(record["cycle"], record["repetition"], record["take"])] = record
    return sorted(segments.values(), key=lambda s: s["start_slot"])


def observations(records: list[dict]) -> dict[int, dict | None]:
    """Slot -> its frame record, or None for a gap record (a replayed record is equal to the first)."""
    found: dict[int, dict | None] = {}
    for record in records:
        if record.get("type") in ("frame", "gap"):
            found.setdefault(record["slot"], record if record["type"] == "frame" else None)
    return found


def hand_state(hand: dict | None) -> list[float]:
    if hand is None:
        return [0.0] * (1 + JOINTS * JOINT_VALUES)
    values = [1.0]
    for joint in hand["joints"]:
        values += [0.0] * JOINT_VALUES if joint is None else [float(v) for v in joint]
    return values


def pinch(hand: dict | None) -> float:
    """Thumb tip to index-finger tip in metres; 0 when the hand or either tip is not tracked."""
    if hand is None or hand["joints"][THUMB_TIP] is None or hand["joints"][INDEX_TIP] is None:
        return 0.0
    return math.dist(hand["joints"][THUMB_TIP][:3], hand["joints"][INDEX_TIP][:3])


def state_and_action(frame: dict | None) -> tuple[list[float], list[float]]:
    """The row of a slot: its 410 state values and 2 action values, all zeros for a gap or a missing slot."""
    if frame is None:
        return [0.0] * (8 + 2 * (1 + JOINTS * JOINT_VALUES)), [0.0, 0.0]
    head = frame["head"]
    state = [0.0] * 8 if head is None else [1.0, *map(float, head["p"]), *map(float, head["q"])]
    state += hand_state(frame["left"]) + hand_state(frame["right"])
    return state, [pinch(frame["left"]), pinch(frame["right"])]


def episode(capture: Path, shard: Path) -> dict:
    records = journal_records(capture / "journal.ndjson")
    segments = retained_segments(records)
    slots = [slot for s in segments for slot in range(s["start_slot"], s["end_slot"])]
    found = observations(records)
    rows = [state_and_action(found.get(slot)) for slot in slots]
    return {
        "videos": {mp4.parts[-3]: str(mp4.resolve()) for mp4 in sorted(shard.glob("videos/*/*/*.mp4"))},
        "episode_id": json.loads((capture / "capture.json").read_text(encoding="utf-8")).get("capture_id"),
        "tasks": [s["task"] for s in segments for _ in range(s["start_slot"], s["end_slot"])],
        "source_frame_index": slots,
        "state": [state for state, _ in rows],
        "action": [action for _, action in rows],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--camera", required=True, help="WIDTHxHEIGHT of every camera, or 'none'")
    parser.add_argument("captures", type=Path, nargs="+", help="capture source folders in dataset order")
    parser.add_argument("--shards", type=Path, nargs="+", required=True, help="their shards, in the same order")
    args = parser.parse_args()
    if len(args.shards) != len(args.captures):
        parser.error("give one shard per capture")
    camera = None
    if args.camera != "none":
        width, height = (int(n) for n in args.camera.split("x"))
        camera = {"width": width, "height": height}
    episodes = [episode(c, s) for c, s in zip(args.captures, args.shards, strict=True)]
    json.dump({"episodes": episodes, "camera": camera}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
