"""Expected frames of a study dataset, read straight from its capture sources' journals.

Prints the JSON that ``lerobot_load.py`` checks against: per episode (in dataset order) the task text
and source slot of every row, derived from the journal's retained segments (capture-source.md
section 4) without the exporter's help, and the episode's mp4 in its own shard (the frames the
assembled dataset must decode to).

Usage: python tests/compat/expectations.py --camera 160x120 CAPTURE_DIR... --shards SHARD_DIR... > expected.json
"""

import argparse
import json
import sys
from pathlib import Path


def retained_segments(journal: Path) -> list[dict]:
    lines = journal.read_text(encoding="utf-8").splitlines()
    segments: dict[tuple[int, int, int], dict] = {}
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break  # torn tail: the recorder lost power mid-append
            raise
        if record.get("type") == "segment" and record["outcome"] != "retry":
            segments[(record["cycle"], record["repetition"], record["take"])] = record
    return sorted(segments.values(), key=lambda s: s["start_slot"])


def episode(capture: Path, shard: Path) -> dict:
    segments = retained_segments(capture / "journal.ndjson")
    return {
        "videos": {mp4.parts[-3]: str(mp4.resolve()) for mp4 in sorted(shard.glob("videos/*/*/*.mp4"))},
        "episode_id": json.loads((capture / "capture.json").read_text(encoding="utf-8")).get("capture_id"),
        "tasks": [s["task"] for s in segments for _ in range(s["start_slot"], s["end_slot"])],
        "source_frame_index": [slot for s in segments for slot in range(s["start_slot"], s["end_slot"])],
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
