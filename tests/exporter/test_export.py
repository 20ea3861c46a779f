"""End-to-end export of hand-written capture sources, checked by reading the shard back."""

import hashlib
import json
import math
import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.cli import main
from exporter.shard import export_shard
from tests.exporter.conftest import (
    DEVICE_ID,
    RATE_HZ,
    USER_AGENT,
    frame,
    joint,
    manifest,
    nominal_time,
    pose,
    segment,
    slot_time,
    standard_records,
    write_source,
)

EXPORTED_AT = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
RETAINED_SLOTS = [*range(15, 30), *range(32, 40)]
JOINT_NAMES = [
    "wrist",
    "thumb-metacarpal",
    "thumb-phalanx-proximal",
    "thumb-phalanx-distal",
    "thumb-tip",
    *(
        f"{finger}-{part}"
        for finger in ("index", "middle", "ring", "pinky")
        for part in (
            "finger-metacarpal",
            "finger-phalanx-proximal",
            "finger-phalanx-intermediate",
            "finger-phalanx-distal",
            "finger-tip",
        )
    ),
]


def expected_state_names() -> list[str]:
    names = [
        "head.tracked",
        "head.position.x",
        "head.position.y",
        "head.position.z",
        "head.rotation.x",
        "head.rotation.y",
        "head.rotation.z",
        "head.rotation.w",
    ]
    for hand in ("left_hand", "right_hand"):
        names.append(f"{hand}.tracked")
        for j in JOINT_NAMES:
            names += [
                f"{hand}.{j}.position.x",
                f"{hand}.{j}.position.y",
                f"{hand}.{j}.position.z",
                f"{hand}.{j}.rotation.x",
                f"{hand}.{j}.rotation.y",
                f"{hand}.{j}.rotation.z",
                f"{hand}.{j}.rotation.w",
                f"{hand}.{j}.radius",
            ]
    return names


def run_export(source: Path, out: Path, *args: str) -> int:
    return main(["export", str(source), str(out), *args])


@pytest.fixture
def shard(source: Path, tmp_path: Path) -> Path:
    result = export_shard(source, tmp_path / "out", exported_at=EXPORTED_AT)
    return result.shard_dir


def data(shard: Path, name: str = "file-000") -> pa.Table:
    return pq.read_table(shard / "data" / "chunk-000" / f"{name}.parquet")


def load_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_layout_is_exactly_the_seed_artefacts(shard: Path, capsys):
    assert shard.name == "episode-000000"
    files = sorted(p.relative_to(shard).as_posix() for p in shard.rglob("*") if p.is_file())
    assert files == [
        "ceres/browser-export-receipt.json",
        "ceres/episode-metadata.json",
        "data/chunk-000/file-000.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "meta/info.json",
        "meta/stats.json",
        "meta/tasks.parquet",
    ]
    assert [p.name for p in shard.parent.iterdir()] == ["episode-000000"]  # no staging folder left
    assert main(["verify", str(shard)]) == 0


def test_info_json(shard: Path):
    info = load_json(shard / "meta" / "info.json")
    assert set(info) == {
        "codebase_version",
        "robot_type",
        "total_episodes",
        "total_frames",
        "total_tasks",
        "chunks_size",
        "data_files_size_in_mb",
        "video_files_size_in_mb",
        "fps",
        "splits",
        "data_path",
        "video_path",
        "features",
    }
    assert info["codebase_version"] == "v3.0"
    assert info["robot_type"] == "ceres_webxr_hands"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (1, 23, 2)
    assert (info["chunks_size"], info["data_files_size_in_mb"], info["video_files_size_in_mb"]) == (1000, 100, 200)
    assert info["fps"] == RATE_HZ
    assert info["splits"] == {"train": "0:1"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] is None
    features = info["features"]
    assert list(features) == [
        "observation.state",
        "action",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
        "ceres.source_frame_index",
        "ceres.source_timestamp",
        "ceres.source_gap",
    ]
    assert features["observation.state"] == {"dtype": "float32", "shape": [410], "names": expected_state_names()}
    assert features["action"] == {
        "dtype": "float32",
        "shape": [2],
        "names": ["left_hand.pinch_distance", "right_hand.pinch_distance"],
    }
    assert features["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    for name in ("frame_index", "episode_index", "index", "task_index", "ceres.source_frame_index"):
        assert features[name] == {"dtype": "int64", "shape": [1], "names": None}
    assert features["ceres.source_timestamp"]["dtype"] == "float64"
    assert features["ceres.source_gap"]["dtype"] == "bool"


def test_data_columns_and_types(shard: Path):
    schema = data(shard).schema
    assert [(f.name, f.type) for f in schema] == [
        ("observation.state", pa.list_(pa.float32(), 410)),
        ("action", pa.list_(pa.float32(), 2)),
        ("timestamp", pa.float32()),
        ("frame_index", pa.int64()),
        ("episode_index", pa.int64()),
        ("index", pa.int64()),
        ("task_index", pa.int64()),
        ("ceres.source_frame_index", pa.int64()),
        ("ceres.source_timestamp", pa.float64()),
        ("ceres.source_gap", pa.bool_()),
    ]


def test_rows_retries_idle_gaps_and_timestamps(shard: Path):
    table = data(shard).to_pydict()
    assert table["ceres.source_frame_index"] == RETAINED_SLOTS  # retry 5-14 and idle slots left out
    n = len(RETAINED_SLOTS)
    assert table["frame_index"] == list(range(n))
    assert table["episode_index"] == [0] * n
    assert table["index"] == list(range(n))
    expected_ts = [float(np.float32(np.float64(i) / RATE_HZ)) for i in range(n)]
    assert table["timestamp"] == expected_ts
    assert table["ceres.source_gap"] == [slot in (18, 21) for slot in RETAINED_SLOTS]
    times = table["ceres.source_timestamp"]
    for slot, t in zip(RETAINED_SLOTS, times, strict=True):
        # a missing slot gets its nominal time from the lowest slot (0) and its t
        assert t == (slot_time(0) + 21 / RATE_HZ if slot == 21 else slot_time(slot))
    assert times[RETAINED_SLOTS.index(21)] == pytest.approx(nominal_time(21))
    assert table["task_index"] == [0] * 15 + [1] * 8


def expected_state(slot: int, *, head=True, left=True, right=True, right_untracked=()) -> np.ndarray:
    values = [1.0, *pose(slot)["p"], *pose(slot)["q"]] if head else [0.0] * 8
    for side, tracked, untracked in ((0, left, ()), (1, right, right_untracked)):
        values.append(1.0 if tracked else 0.0)
        for j in range(25):
            values += joint(slot, side, j) if tracked and j not in untracked else [0.0] * 8
    return np.array(values, dtype=np.float32)


def test_state_vectors(shard: Path):
    table = data(shard)
    state = np.array(table["observation.state"].to_pylist(), dtype=np.float32)
    rows = {slot: state[i] for i, slot in enumerate(RETAINED_SLOTS)}
    names = expected_state_names()
    np.testing.assert_array_equal(rows[16], expected_state(16))
    assert rows[16][names.index("left_hand.thumb-tip.position.x")] == np.float32(joint(16, 0, 4)[0])
    np.testing.assert_array_equal(rows[25], expected_state(25, left=False))
    np.testing.assert_array_equal(rows[26], expected_state(26, head=False, right_untracked=(9,)))
    for slot in (18, 21):  # explicit gap and missing slot
        np.testing.assert_array_equal(rows[slot], np.zeros(410, dtype=np.float32))


def pinch(slot: int, side: int) -> float:
    return math.dist(joint(slot, side, 4)[:3], joint(slot, side, 9)[:3])


def test_pinch_distances(shard: Path):
    action = np.array(data(shard)["action"].to_pylist(), dtype=np.float32)
    rows = dict(zip(RETAINED_SLOTS, action, strict=True))
    for slot in (15, 16, 33, 39):
        np.testing.assert_allclose(rows[slot], [pinch(slot, 0), pinch(slot, 1)], rtol=1e-6)
        assert rows[slot][0] > 0
    np.testing.assert_allclose(rows[25], [0.0, pinch(25, 1)], rtol=1e-6)  # left hand untracked
    np.testing.assert_allclose(rows[26], [pinch(26, 0), 0.0], rtol=1e-6)  # right index tip untracked
    np.testing.assert_array_equal(rows[18], [0.0, 0.0])
    np.testing.assert_array_equal(rows[21], [0.0, 0.0])


def expected_stats(values: np.ndarray) -> dict[str, list]:
    values = values.reshape(len(values), -1).astype(np.float64)
    stats = {
        "min": values.min(0),
        "max": values.max(0),
        "mean": values.mean(0),
        "std": values.std(0),
        "q01": np.quantile(values, 0.01, axis=0),
        "q10": np.quantile(values, 0.10, axis=0),
        "q50": np.quantile(values, 0.50, axis=0),
        "q90": np.quantile(values, 0.90, axis=0),
        "q99": np.quantile(values, 0.99, axis=0),
    }
    return {k: v.tolist() for k, v in stats.items()} | {"count": [len(values)]}


def data_columns(shard: Path) -> dict[str, np.ndarray]:
    table = data(shard)
    out = {}
    for name in table.column_names:
        column = table[name].to_pylist()
        out[name] = np.array(column, dtype=np.float64)
    return out


def test_stats_json_and_episode_stats(shard: Path):
    stats = load_json(shard / "meta" / "stats.json")
    episodes = pq.read_table(shard / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()[0]
    columns = data_columns(shard)
    assert list(stats) == list(columns)
    for name, values in columns.items():
        want = expected_stats(values)
        assert set(stats[name]) == set(want)
        for stat, expected in want.items():
            np.testing.assert_allclose(stats[name][stat], expected, rtol=1e-9, atol=1e-12, err_msg=f"{name}/{stat}")
            np.testing.assert_allclose(episodes[f"stats/{name}/{stat}"], expected, rtol=1e-9, atol=1e-12)
    assert stats["ceres.source_gap"]["mean"] == [pytest.approx(2 / 23)]
    assert stats["observation.state"]["count"] == [23]


def test_episodes_parquet(shard: Path):
    table = pq.read_table(shard / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    assert table.num_rows == 1
    row = table.to_pylist()[0]
    head = [
        "episode_index",
        "tasks",
        "length",
        "data/chunk_index",
        "data/file_index",
        "dataset_from_index",
        "dataset_to_index",
    ]
    assert table.column_names[: len(head)] == head
    assert table.column_names[-2:] == ["meta/episodes/chunk_index", "meta/episodes/file_index"]
    assert row["tasks"] == ["Pick up the red cup", "Open the drawer"]
    assert (row["episode_index"], row["length"], row["dataset_from_index"], row["dataset_to_index"]) == (0, 23, 0, 23)
    types = {f.name: f.type for f in table.schema}
    assert types["tasks"] == pa.list_(pa.string())
    assert types["stats/observation.state/mean"] == pa.list_(pa.float64())
    assert types["stats/timestamp/min"] == pa.list_(pa.float64())
    assert types["stats/action/count"] == pa.list_(pa.int64())
    assert len(row["stats/observation.state/q99"]) == 410
    assert not any(name.startswith("videos/") for name in table.column_names)
    allowed = (*head, "stats/", "meta/episodes/", "ceres/")
    assert all(name.startswith(allowed) for name in table.column_names)


def test_tasks_parquet_and_stable_indices_across_shards(shard: Path, tmp_path: Path):
    tasks0 = pd.read_parquet(shard / "meta" / "tasks.parquet")
    assert tasks0.index.name == "task"
    assert list(tasks0.index) == ["Pick up the red cup", "Open the drawer"]
    assert tasks0["task_index"].tolist() == [0, 1]
    assert tasks0["task_index"].dtype == np.int64

    records = [frame(s) for s in range(10)] + [
        segment(0, 4, "Wipe the table", take=0),
        segment(4, 10, "Open the drawer", repetition=1),
    ]
    second = write_source(tmp_path / "second", records)
    out = tmp_path / "out"
    tasks_file = shard / "meta" / "tasks.parquet"
    assert run_export(second, out, "--episode-index", "1", "--from-index", "23", "--tasks", str(tasks_file)) == 0
    shard1 = out / "episode-000001"
    tasks1 = pd.read_parquet(shard1 / "meta" / "tasks.parquet")
    assert list(tasks1.index) == ["Pick up the red cup", "Open the drawer", "Wipe the table"]
    assert tasks1["task_index"].tolist() == [0, 1, 2]
    table = pq.read_table(shard1 / "data" / "chunk-000" / "file-001.parquet").to_pydict()
    assert table["task_index"] == [2] * 4 + [1] * 6
    assert table["index"] == list(range(23, 33))
    assert table["episode_index"] == [1] * 10
    info = load_json(shard1 / "meta" / "info.json")
    assert (info["total_tasks"], info["splits"]) == (3, {"train": "1:2"})
    episodes = pq.read_table(shard1 / "meta" / "episodes" / "chunk-000" / "file-001.parquet").to_pylist()[0]
    assert (episodes["dataset_from_index"], episodes["dataset_to_index"]) == (23, 33)
    assert (episodes["meta/episodes/file_index"], episodes["data/file_index"]) == (1, 1)
    assert episodes["tasks"] == ["Wipe the table", "Open the drawer"]
    meta = load_json(shard1 / "ceres" / "episode-metadata.json")
    assert [s["task_index"] for s in meta["segments"]] == [2, 1]


def test_episode_index_chunking(source: Path, tmp_path: Path):
    result = export_shard(source, tmp_path / "out", episode_index=1017, from_index=5000)
    assert result.shard_dir.name == "episode-001017"
    table = pq.read_table(result.shard_dir / "data" / "chunk-001" / "file-017.parquet")
    assert table["index"].to_pylist()[0] == 5000
    assert (result.shard_dir / "meta" / "episodes" / "chunk-001" / "file-017.parquet").is_file()


def test_episode_metadata(tmp_path: Path):
    calibration = {
        "model": "pinhole-radtan5",
        "intrinsics": {"fx": 500.5, "fy": 501, "cx": 320, "cy": 240},
        "distortion": [0.1, -0.02, 0.001, 0.0, 0.003],
        "rms_error_px": 0.31,
        "sample_count": 42,
        "captured_at": "2026-02-28T09:00:00Z",
        "device_id": DEVICE_ID,
    }
    spec = {"steps": ["Pick up the red cup", "Öffne die Schublade"], "cycles": 2, "tolerance": 1e-05}
    data = manifest(calibration=calibration, task_specification={"path": "task-specification.json", "version": "2.1"})
    source = write_source(tmp_path / "source", standard_records(), data=data)
    (source / "task-specification.json").write_text(json.dumps(spec, indent=4), encoding="utf-8")
    result = export_shard(source, tmp_path / "out", episode_index=4, from_index=9, exported_at=EXPORTED_AT)
    meta = load_json(result.shard_dir / "ceres" / "episode-metadata.json")
    assert meta["schema"] == "ceres-episode-export-metadata"
    assert meta["version"] == 3
    assert (meta["episode_id"], meta["episode_index"]) == ("cap-2026-001", 4)
    assert meta["recorded_at"] == "2026-03-01T10:00:00Z"
    assert meta["exported_at"] == "2026-03-02T08:30:00Z"
    assert meta["camera"] is None and meta["video"] is None
    assert meta["capture_device"] == {
        "headset_model": {"availability": "known", "value": "Quest 3"},
        "os": {"availability": "unknown"},
        "eye_tracking": {"availability": "unavailable"},
        "nested": {"availability": "known", "value": {"build": "74"}},
    }
    assert meta["recorder_rate_hz"] == RATE_HZ
    assert meta["study"] == {
        "headset_id": "HS-01",
        "demonstrator_id": None,  # blank claim: never invented by the exporter
        "project_id": "P-7",
        "consent_date": "2026-02-01",
        "consent_document_id": "ICF-2026-03",
        "raw_audio_retained": False,
    }
    assert meta["calibration"] == {k: v for k, v in calibration.items() if k != "device_id"}
    success, failure = meta["segments"]
    assert success == {
        "cycle": 0,
        "repetition": 0,
        "take": 1,
        "task": "Pick up the red cup",
        "task_index": 0,
        "annotations": {"note": "ok"},
        "outcome": "success",
        "durable_frames": 13,
        "gap_frames": 2,
        "source_start_timestamp": slot_time(15),
        "source_end_timestamp": slot_time(29),
        "frame_index_from": 0,
        "frame_index_to": 15,
    }
    assert (failure["outcome"], failure["durable_frames"], failure["gap_frames"]) == ("failure", 8, 0)
    assert (failure["frame_index_from"], failure["frame_index_to"]) == (15, 23)
    assert failure["source_end_timestamp"] == slot_time(39)
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    digest = hashlib.sha256(canonical).hexdigest()
    assert meta["task_specification"] == {
        "version": "2.1",
        "sha256": digest,
        "path": f"ceres/task-specifications/{digest}.json",
    }
    assert (result.shard_dir / "ceres" / "task-specifications" / f"{digest}.json").read_bytes() == canonical
    assert meta["warnings"] == []


def test_study_json_overrides_recorder_claims(source: Path, tmp_path: Path):
    study = {
        "headset_id": "HS-REG",
        "demonstrator_id": "amber-fox-otter-slate",
        "project_id": "P-7",
        "consent_date": "2026-01-15",
        "consent_document_id": "ICF-2026-01",
        "raw_audio_retained": True,
    }
    study_file = tmp_path / "study.json"
    study_file.write_text(json.dumps(study))
    assert run_export(source, tmp_path / "out", "--study-json", str(study_file)) == 0
    meta = load_json(tmp_path / "out" / "episode-000000" / "ceres" / "episode-metadata.json")
    assert meta["study"] == study


def test_receipt(shard: Path):
    receipt = load_json(shard / "ceres" / "browser-export-receipt.json")
    assert receipt["schema"] == "ceres-browser-export-receipt"
    assert (receipt["version"], receipt["episode_id"], receipt["episode_index"]) == (1, "cap-2026-001", 0)
    assert receipt["created_at"] == "2026-03-02T08:30:00Z"
    files = sorted(p.relative_to(shard).as_posix() for p in shard.rglob("*") if p.is_file())
    files.remove("ceres/browser-export-receipt.json")
    assert [a["path"] for a in receipt["artefacts"]] == files
    for artefact in receipt["artefacts"]:
        body = (shard / artefact["path"]).read_bytes()
        assert artefact["sha256"] == hashlib.sha256(body).hexdigest()
        assert artefact["bytes"] == len(body)
        suffix = Path(artefact["path"]).suffix
        assert (
            artefact["media_type"]
            == {".parquet": "application/vnd.apache.parquet", ".json": "application/json"}[suffix]
        )


def all_bytes(folder: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()]


def test_no_raw_device_id_or_user_agent_anywhere(shard: Path):
    for path, body in all_bytes(shard):
        for secret in (DEVICE_ID, USER_AGENT, "SECRET-UA", "user_agent", "device_id"):
            assert secret.encode() not in body, (path, secret)


def test_torn_tail_is_ignored_with_a_warning(tmp_path: Path, capsys):
    torn = '{"type":"frame","slot":40,"t":81'
    records = [*standard_records(), torn]
    source = write_source(tmp_path / "source", records, tail="")
    assert run_export(source, tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert "warning:" in err and f"journal.ndjson:{len(records)}:" in err and "torn" in err
    meta = load_json(tmp_path / "out" / "episode-000000" / "ceres" / "episode-metadata.json")
    assert any("torn" in w for w in meta["warnings"])
    assert data(tmp_path / "out" / "episode-000000").num_rows == 23


def test_last_record_without_newline_is_accepted(tmp_path: Path):
    source = write_source(tmp_path / "source", standard_records(), tail="")
    assert run_export(source, tmp_path / "out") == 0
    assert data(tmp_path / "out" / "episode-000000")["ceres.source_frame_index"].to_pylist() == RETAINED_SLOTS


def test_replays_equal_once_parsed_are_ignored(shard: Path, tmp_path: Path):
    records = standard_records()
    replayed_frame = json.dumps(dict(reversed(list(frame(16).items()))), indent=1).replace("\n", " ")
    replayed_gap = f'{{ "t" : {slot_time(18)!r} , "slot":18, "type":"gap"}}'
    replayed_segment = json.dumps(segment(32, 40, "Open the drawer", "failure", repetition=1), separators=(", ", ": "))
    records += [replayed_frame, replayed_gap, replayed_segment, json.dumps(frame(3))]
    source = write_source(tmp_path / "replayed", records)
    result = export_shard(source, tmp_path / "replayed-out", exported_at=EXPORTED_AT)
    assert (result.shard_dir / "data" / "chunk-000" / "file-000.parquet").read_bytes() == (
        shard / "data" / "chunk-000" / "file-000.parquet"
    ).read_bytes()
    assert len(load_json(result.shard_dir / "ceres" / "episode-metadata.json")["segments"]) == 2


def test_replay_with_integral_float_equals_integer(tmp_path: Path):
    records = standard_records()
    first = frame(16)
    first["head"]["p"][1] = 2
    replay = dict(first, head={"p": [first["head"]["p"][0], 2.0, first["head"]["p"][2]], "q": first["head"]["q"]})
    records[records.index(frame(16))] = first
    without_replay = write_source(tmp_path / "without", records)
    source = write_source(tmp_path / "source", [*records, replay])
    assert run_export(source, tmp_path / "out") == 0
    table = data(tmp_path / "out" / "episode-000000")
    assert table["ceres.source_frame_index"].to_pylist() == RETAINED_SLOTS
    head_y = expected_state_names().index("head.position.y")
    assert table["observation.state"][RETAINED_SLOTS.index(16)].as_py()[head_y] == 2.0
    assert run_export(without_replay, tmp_path / "without-out") == 0
    assert table.equals(data(tmp_path / "without-out" / "episode-000000"))


def test_unknown_record_types_are_skipped_without_checks(tmp_path: Path):
    odd = [
        {"type": "annotation", "slot": 16, "t": float("1e308"), "whatever": [1, 2]},
        {"type": "heartbeat", "slot": 16},
    ]
    source = write_source(tmp_path / "source", standard_records() + odd)
    assert run_export(source, tmp_path / "out") == 0
    assert data(tmp_path / "out" / "episode-000000").num_rows == 23


def test_same_input_gives_identical_bytes(source: Path, tmp_path: Path):
    first = export_shard(source, tmp_path / "a", exported_at=EXPORTED_AT)
    second = export_shard(source, tmp_path / "b", exported_at=EXPORTED_AT)
    assert [(p.relative_to(first.shard_dir), b) for p, b in all_bytes(first.shard_dir)] == [
        (p.relative_to(second.shard_dir), b) for p, b in all_bytes(second.shard_dir)
    ]
    assert first.receipt_sha256 == second.receipt_sha256


def test_existing_episode_folder_is_refused_and_left_unchanged(shard: Path, source: Path, capsys):
    before = all_bytes(shard)
    assert run_export(source, shard.parent) == 2
    assert "episode-000000" in capsys.readouterr().err
    assert all_bytes(shard) == before
    assert [p.name for p in shard.parent.iterdir()] == ["episode-000000"]


@pytest.mark.parametrize("top", ["", "capture-2026-001/"])
def test_zip_source_at_root_or_in_one_top_folder(source: Path, shard: Path, tmp_path: Path, top: str):
    archive = tmp_path / "source.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        if top:
            zf.writestr(top, "")
        for name in ("capture.json", "journal.ndjson"):
            zf.write(source / name, top + name)
    result = export_shard(archive, tmp_path / "zip-out", exported_at=EXPORTED_AT)
    for name in ("data/chunk-000/file-000.parquet", "ceres/episode-metadata.json", "meta/stats.json"):
        assert (result.shard_dir / name).read_bytes() == (shard / name).read_bytes()


def test_command_line_in_a_subprocess(source: Path, tmp_path: Path):
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "exporter", "export", str(source), str(out), "--episode-index", "2"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "episode-000002: 23 rows, 2 gap rows, 2 retained segments, 1 dropped retries, video none"
    )
    verify = subprocess.run(
        [sys.executable, "-m", "exporter", "verify", str(out / "episode-000002")],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert (verify.returncode, verify.stdout) == (0, "")
