"""The shard's feature table (``meta/info.json`` ``features``) and the 410 observation-state names."""

from typing import Any

JOINTS: tuple[str, ...] = (
    "wrist",
    "thumb-metacarpal",
    "thumb-phalanx-proximal",
    "thumb-phalanx-distal",
    "thumb-tip",
    *(
        f"{finger}-{part}"
        for finger in ("index-finger", "middle-finger", "ring-finger", "pinky-finger")
        for part in ("metacarpal", "phalanx-proximal", "phalanx-intermediate", "phalanx-distal", "tip")
    ),
)
THUMB_TIP = JOINTS.index("thumb-tip")
INDEX_TIP = JOINTS.index("index-finger-tip")

JOINT_VALUES = 8  # position x,y,z, rotation x,y,z,w, radius
HEAD_VALUES = 8  # tracked flag, position x,y,z, rotation x,y,z,w
HAND_VALUES = 1 + len(JOINTS) * JOINT_VALUES  # tracked flag + 25 joints


def _hand_names(hand: str) -> list[str]:
    names = [f"{hand}.tracked"]
    for joint in JOINTS:
        names += [f"{hand}.{joint}.position.{axis}" for axis in "xyz"]
        names += [f"{hand}.{joint}.rotation.{axis}" for axis in "xyzw"]
        names.append(f"{hand}.{joint}.radius")
    return names


STATE_NAMES: tuple[str, ...] = (
    "head.tracked",
    *(f"head.position.{axis}" for axis in "xyz"),
    *(f"head.rotation.{axis}" for axis in "xyzw"),
    *_hand_names("left_hand"),
    *_hand_names("right_hand"),
)
STATE_DIM = len(STATE_NAMES)
assert STATE_DIM == 410  # the seed fixes this number

ACTION_NAMES: tuple[str, ...] = ("left_hand.pinch_distance", "right_hand.pinch_distance")

# Non-video features in table order (shard.md section 2): name -> (dtype, shape, names).
DATA_FEATURES: dict[str, tuple[str, list[int], list[str] | None]] = {
    "observation.state": ("float32", [STATE_DIM], list(STATE_NAMES)),
    "action": ("float32", [len(ACTION_NAMES)], list(ACTION_NAMES)),
    "timestamp": ("float32", [1], None),
    "frame_index": ("int64", [1], None),
    "episode_index": ("int64", [1], None),
    "index": ("int64", [1], None),
    "task_index": ("int64", [1], None),
    "ceres.source_frame_index": ("int64", [1], None),
    "ceres.source_timestamp": ("float64", [1], None),
    "ceres.source_gap": ("bool", [1], None),
}

# The data parquet's columns written with dictionary encoding: those whose values repeat within an episode.
# The others (float vectors, times, running indices) hardly repeat: the writer would build each row group's
# dictionary, find it no smaller than the values and fall back, at about half the time it takes to encode
# them, for a slightly larger file (issue 26: 0.99 s and 95.0 MB against 0.49 s and 90.6 MB for an hour).
DICTIONARY_COLUMNS = ("episode_index", "task_index")


def dictionary_columns(names: list[str]) -> list[str]:
    """The columns among ``names`` that a data parquet writer encodes with a dictionary."""
    return [name for name in names if name in DICTIONARY_COLUMNS]


def video_key(camera: str) -> str:
    return f"observation.images.{camera}"


def feature_table(fps: int, video: tuple[str, int, int] | None) -> dict[str, dict[str, Any]]:
    """The ``features`` object of ``meta/info.json``; ``video`` is (key, height, width) or None."""
    features: dict[str, dict[str, Any]] = {}
    for name, (dtype, shape, names) in DATA_FEATURES.items():
        features[name] = {"dtype": dtype, "shape": shape, "names": names}
        if name == "action" and video is not None:
            key, height, width = video
            features[key] = {
                "dtype": "video",
                "shape": [height, width, 3],
                "names": ["height", "width", "channels"],
                "info": {
                    "video.height": height,
                    "video.width": width,
                    "video.codec": "h264",
                    "video.pix_fmt": "yuv420p",
                    "video.fps": fps,
                    "video.channels": 3,
                    "has_audio": False,
                    "is_depth_map": False,
                },
            }
    return features
