"""Load an assembled CERES study dataset with LeRobot's own reader and check every frame.

Runs in the separate LeRobot venv (Python 3.12, lerobot 0.6.1), not in the app's; started by
``lerobot_check.sh`` with the Hub switched off. The expectations file is JSON:
``{"episodes": [{"episode_id": str, "tasks": [task text per frame], "source_frame_index": [slot per frame],
"state": [[410 values] per frame], "action": [[2 values] per frame],
"videos": {video key: the episode's mp4 in its shard}}], "camera": {"height": H, "width": W} | null}``,
derived from the capture sources and shards, not from the assembled dataset. State and action are the
journal's numbers (and pinch distances computed from them in float64): each frame's vectors must equal them
rounded to float32, value by value.
Exit status 1 with one line per problem when anything differs; one summary line otherwise.
"""

import argparse
import json
import sys
from importlib.metadata import version
from pathlib import Path

import av
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata

REPO_ID = "local/ceres"
MAX_PROBLEMS = 20


def decoded_frames(path: Path) -> list[np.ndarray]:
    """Every frame of an mp4 as HWC uint8 RGB, decoded independently of LeRobot's reader."""
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def vector_problems(where: str, feature: str, actual: np.ndarray, expected: np.ndarray,
                    names: list[str]) -> list[str]:
    """A vector feature of one frame against its expected float32 values, item by item (-0.0 equals 0.0)."""
    if actual.dtype != np.float32 or actual.shape != expected.shape:
        return [f"{where}: {feature} is {actual.dtype} {tuple(actual.shape)}, expected float32 {expected.shape}"]
    differing = np.flatnonzero(actual != expected)
    return [f"{where}: {feature}[{names[k]}] is {actual[k]}, expected {expected[k]}" for k in differing[:3]]


def check(root: Path, expected: dict) -> tuple[list[str], str]:
    problems: list[str] = []
    meta = LeRobotDatasetMetadata(REPO_ID, root=root)
    for feature in ("observation.state", "action", *meta.video_keys):
        stats = (meta.stats or {}).get(feature, {})
        missing = [key for key in ("q01", "q99") if key not in stats]
        if missing:
            problems.append(f"meta/stats.json: {feature} lacks {', '.join(missing)}")

    ds = LeRobotDataset(REPO_ID, root=root, video_backend="pyav", return_uint8=True)
    episodes = expected["episodes"]
    tasks = [task for episode in episodes for task in episode["tasks"]]
    slots = [slot for episode in episodes for slot in episode["source_frame_index"]]
    states = np.array([row for episode in episodes for row in episode["state"]], dtype=np.float32)
    actions = np.array([row for episode in episodes for row in episode["action"]], dtype=np.float32)
    frame_episodes = [i for i, episode in enumerate(episodes) for _ in episode["tasks"]]
    if ds.num_episodes != len(episodes):
        problems.append(f"num_episodes is {ds.num_episodes}, expected {len(episodes)}")
    if len(ds) != len(tasks):
        problems.append(f"len(ds) is {len(ds)}, expected {len(tasks)} frames")
    camera = expected["camera"]
    if (camera is None) != (not ds.meta.video_keys):
        problems.append(f"video keys {ds.meta.video_keys}, expected camera {camera}")
    if problems:
        return problems, ""

    video_frames: dict[tuple[int, str], list[np.ndarray]] = {}
    for i in range(len(ds)):
        item = ds[i]
        where = f"frame {i} (episode {frame_episodes[i]})"
        if int(item["index"]) != i or int(item["episode_index"]) != frame_episodes[i]:
            problems.append(f"{where}: index {int(item['index'])}, episode_index {int(item['episode_index'])}")
        if item["task"] != tasks[i]:
            problems.append(f"{where}: task {item['task']!r}, expected {tasks[i]!r}")
        if int(item["ceres.source_frame_index"]) != slots[i]:
            problems.append(
                f"{where}: ceres.source_frame_index {int(item['ceres.source_frame_index'])}, expected slot {slots[i]}"
            )
        for feature, expected_rows in (("observation.state", states), ("action", actions)):
            problems += vector_problems(where, feature, item[feature].numpy(), expected_rows[i],
                                        ds.meta.features[feature]["names"])
        for key in ds.meta.video_keys:
            image = item[key]
            if tuple(image.shape) != (3, camera["height"], camera["width"]):
                problems.append(f"{where}: {key} shape {tuple(image.shape)}")
                continue
            episode = frame_episodes[i]
            shard_video = Path(episodes[episode]["videos"][key])
            if (episode, key) not in video_frames:
                video_frames = {(episode, key): decoded_frames(shard_video)}
            frames = video_frames[(episode, key)]
            frame_index = int(item["frame_index"])
            if frame_index >= len(frames):
                problems.append(f"{where}: {key} has only {len(frames)} frames")
            elif not np.array_equal(image.permute(1, 2, 0).numpy(), frames[frame_index]):
                problems.append(f"{where}: {key} pixels differ from frame {frame_index} of {shard_video}")
        if len(problems) >= MAX_PROBLEMS:
            break
    cameras = "+".join(key.rsplit(".", 1)[-1] for key in ds.meta.video_keys) or "no camera"
    summary = f"{root.name}: {ds.num_episodes} episodes/{len(ds)} frames/{len(ds.meta.tasks)} tasks/{cameras}"
    return problems, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "pairs", nargs="+", metavar="ROOT EXPECTED", help="assembled dataset folder and its expectations JSON"
    )
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("give dataset folders and expectation files in pairs")
    summaries = []
    for root, expected in zip(args.pairs[::2], args.pairs[1::2], strict=True):
        try:
            problems, summary = check(Path(root), json.loads(Path(expected).read_text(encoding="utf-8")))
        except Exception as exc:  # any failure inside LeRobot's reader is a finding, reported in one line
            problems, summary = [f"LeRobot could not load it: {type(exc).__name__}: {exc}"], ""
        for problem in problems:
            print(f"lerobot_load: {Path(root).name}: {problem}", file=sys.stderr)
        summaries.append(summary if not problems else None)
    if None in summaries:
        return 1
    print(
        f"lerobot {version('lerobot')} loaded {'; '.join(summaries)}: every frame's task, slot, state, action "
        "and decoded pixels as expected"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
