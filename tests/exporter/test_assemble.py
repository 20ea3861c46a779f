"""Assembling episode shards into one study dataset (shard.md section 10), read back with pyarrow and PyAV."""

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import av
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.assemble import assemble_dataset, verify_dataset
from exporter.cli import main
from exporter.errors import AssemblyError
from exporter.generate import generate_capture
from exporter.shard import export_shard
from exporter.task_table import read_tasks

CREATED_AT = datetime(2026, 11, 30, 4, 0, 0, tzinfo=UTC)
VIDEO = "observation.images.passthrough"
LEROBOT_FILES = ("data/", "meta/episodes/", "videos/")


def _export_chain(root: Path, specs: list[dict], first_index: int = 0) -> list[Path]:
    """Generate and export captures as consecutive episodes with chained task tables and from-index."""
    shards, tasks, from_index = [], None, 0
    for offset, spec in enumerate(specs):
        capture = generate_capture(root / "captures" / f"capture-{first_index + offset}", seconds=2, **spec)
        result = export_shard(
            capture, root / "shards", episode_index=first_index + offset, from_index=from_index, tasks=tasks
        )
        shards.append(result.shard_dir)
        tasks, from_index = result.tasks, from_index + result.rows
    return shards


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    specs = [{"seed": 11, "retries": 0}, {"seed": 12, "retries": 1}, {"seed": 13, "retries": 0}]
    return _export_chain(tmp_path_factory.mktemp("study"), specs)


@pytest.fixture(scope="module")
def dataset(shards: list[Path]) -> Path:
    out = shards[0].parent.parent / "dataset"
    result = assemble_dataset(out, shards, created_at=CREATED_AT)
    assert result.dataset_dir == out and not result.renumbered
    return out


@pytest.fixture(scope="module")
def without_one(shards: list[Path]) -> Path:
    out = shards[0].parent.parent / "without-1"
    result = assemble_dataset(out, [shards[2], shards[0]], created_at=CREATED_AT)
    assert result.renumbered
    assert [(e.episode_index, e.source_episode_index) for e in result.episodes] == [(0, 0), (1, 2)]
    return out


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _data(root: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted(root.glob("data/*/*.parquet")))


def _episodes(root: Path) -> list[dict]:
    return pa.concat_tables(pq.read_table(p) for p in sorted(root.glob("meta/episodes/*/*.parquet"))).to_pylist()


def _values(table: pa.Table, name: str) -> np.ndarray:
    column = table.column(name).combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        return column.flatten().to_numpy().reshape(len(column), -1).astype(np.float64)
    return column.to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, 1)


def _expected_stats(values: np.ndarray) -> dict[str, list]:
    stats = {
        "min": values.min(axis=0),
        "max": values.max(axis=0),
        "mean": values.mean(axis=0),
        "std": values.std(axis=0),
    }
    for key, q in {"q01": 0.01, "q10": 0.1, "q50": 0.5, "q90": 0.9, "q99": 0.99}.items():
        stats[key] = np.quantile(values, q, axis=0)
    return stats


def _frame_count(mp4: Path) -> int:
    with av.open(str(mp4)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_lerobot_files_are_laid_over_one_folder(shards: list[Path], dataset: Path):
    expected = {"meta/info.json", "meta/stats.json", "meta/tasks.parquet", "ceres/assembly.json"}
    expected.add("ceres/dataset-receipt.json")
    for index, shard in enumerate(shards):
        for name in _files(shard):
            if name.startswith(LEROBOT_FILES):
                expected.add(name)
                # nothing renumbered: the episode's files are copied byte for byte
                assert (dataset / name).read_bytes() == (shard / name).read_bytes()
            elif name.startswith("ceres/task-specifications/"):
                expected.add(name)
        expected.add(f"ceres/episodes/episode-{index:06d}/episode-metadata.json")
        expected.add(f"ceres/episodes/episode-{index:06d}/source-receipt.json")
    assert _files(dataset) == expected
    assert len(list(dataset.glob(f"videos/{VIDEO}/chunk-000/file-*.mp4"))) == 3


def test_info_totals_and_splits(shards: list[Path], dataset: Path):
    info = _json(dataset / "meta/info.json")
    shard_info = _json(shards[0] / "meta/info.json")
    assert info["total_episodes"] == 3
    assert (
        info["total_frames"]
        == _data(dataset).num_rows
        == sum(_json(s / "meta/info.json")["total_frames"] for s in shards)
    )
    assert info["total_tasks"] == len(pd.read_parquet(dataset / "meta/tasks.parquet"))
    assert info["splits"] == {"train": "0:3"}
    changed = {"total_episodes", "total_frames", "total_tasks", "splits"}
    assert {k: v for k, v in info.items() if k not in changed} == {
        k: v for k, v in shard_info.items() if k not in changed
    }
    assert list(info) == list(shard_info)


def test_tasks_table_is_the_longest(shards: list[Path], dataset: Path):
    tables = [read_tasks(s / "meta/tasks.parquet") for s in shards]
    frame = pd.read_parquet(dataset / "meta/tasks.parquet")
    assert frame.index.name == "task"
    assert frame.index.tolist() == max(tables, key=len)
    assert frame["task_index"].tolist() == list(range(len(frame)))
    assert len(set(frame.index)) > len(tables[0])  # the chain really grew the table


def test_stats_are_exact_over_all_rows(shards: list[Path], dataset: Path):
    stats = _json(dataset / "meta/stats.json")
    data = _data(dataset)
    assert list(stats) == list(_json(dataset / "meta/info.json")["features"])
    for name in data.column_names:
        values = _values(data, name)
        assert stats[name]["count"] == [data.num_rows]
        for stat, expected in _expected_stats(values).items():
            np.testing.assert_allclose(stats[name][stat], expected, rtol=1e-12, atol=1e-12, err_msg=f"{name} {stat}")
    # the exact quantiles differ from what pooling the shards' quantiles would give
    pooled_q50 = np.mean([_json(s / "meta/stats.json")["observation.state"]["q50"] for s in shards], axis=0)
    assert not np.allclose(stats["observation.state"]["q50"], pooled_q50)


def test_video_stats_pool_the_sampled_frames(shards: list[Path], dataset: Path):
    video = _json(dataset / "meta/stats.json")[VIDEO]
    per_shard = [_json(s / "meta/stats.json")[VIDEO] for s in shards]
    counts = np.array([s["count"][0] for s in per_shard], dtype=np.float64)
    means = np.array([s["mean"] for s in per_shard])
    stds = np.array([s["std"] for s in per_shard])
    mean = np.einsum("e,ecij->cij", counts, means) / counts.sum()
    second_moment = np.einsum("e,ecij->cij", counts, stds**2 + means**2) / counts.sum()
    assert video["count"] == [int(counts.sum())]
    np.testing.assert_allclose(video["mean"], mean, rtol=1e-12)
    np.testing.assert_allclose(video["std"], np.sqrt(second_moment - mean**2), rtol=1e-9)
    np.testing.assert_array_equal(video["min"], np.min([s["min"] for s in per_shard], axis=0))
    np.testing.assert_array_equal(video["max"], np.max([s["max"] for s in per_shard], axis=0))
    for key in ("q01", "q10", "q50", "q90", "q99"):
        # documented approximation: the count-weighted mean of the episodes' sampled quantiles
        quantiles = np.array([s[key] for s in per_shard])
        np.testing.assert_allclose(video[key], np.einsum("e,ecij->cij", counts, quantiles) / counts.sum())
        assert np.min(video[key]) >= 0.0 and np.max(video[key]) <= 1.0


def test_assembly_json(shards: list[Path], dataset: Path):
    assembly = _json(dataset / "ceres/assembly.json")
    assert assembly["schema"] == "ceres-dataset-assembly"
    assert assembly["version"] == 1
    assert assembly["created_at"] == "2026-11-30T04:00:00Z"
    assert assembly["episodes"] == [
        {
            "episode_index": index,
            "source_episode_index": index,
            "episode_id": _json(shard / "ceres/browser-export-receipt.json")["episode_id"],
            "source_receipt_sha256": hashlib.sha256(
                (shard / "ceres/browser-export-receipt.json").read_bytes()
            ).hexdigest(),
        }
        for index, shard in enumerate(shards)
    ]


def test_ceres_files_move_byte_equal(shards: list[Path], dataset: Path):
    for index, shard in enumerate(shards):
        moved = dataset / f"ceres/episodes/episode-{index:06d}"
        assert (moved / "episode-metadata.json").read_bytes() == (shard / "ceres/episode-metadata.json").read_bytes()
        receipt = (shard / "ceres/browser-export-receipt.json").read_bytes()
        assert (moved / "source-receipt.json").read_bytes() == receipt
        for spec in (shard / "ceres/task-specifications").iterdir():
            assert (dataset / "ceres/task-specifications" / spec.name).read_bytes() == spec.read_bytes()


def test_dataset_receipt_lists_every_file_and_verifies(dataset: Path, tmp_path: Path):
    receipt = _json(dataset / "ceres/dataset-receipt.json")
    assert receipt["schema"] == "ceres-dataset-receipt"
    assert receipt["version"] == 1
    assert receipt["created_at"] == "2026-11-30T04:00:00Z"
    assert receipt["total_episodes"] == 3
    paths = [a["path"] for a in receipt["artefacts"]]
    assert paths == sorted(_files(dataset) - {"ceres/dataset-receipt.json"})
    for artefact in receipt["artefacts"]:
        content = (dataset / artefact["path"]).read_bytes()
        assert artefact["sha256"] == hashlib.sha256(content).hexdigest()
        assert artefact["bytes"] == len(content)
        suffix = Path(artefact["path"]).suffix
        assert (
            artefact["media_type"]
            == {
                ".parquet": "application/vnd.apache.parquet",
                ".json": "application/json",
                ".mp4": "video/mp4",
            }[suffix]
        )
    assert verify_dataset(dataset) == []

    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)
    stats = copy / "meta/stats.json"
    stats.write_bytes(stats.read_bytes().replace(b"1", b"2", 1))
    (copy / "ceres/extra.json").write_text("{}")
    problems = verify_dataset(copy)
    assert any(p.startswith("meta/stats.json") for p in problems)
    assert any(p.startswith("ceres/extra.json") for p in problems)


def test_leaving_an_episode_out_renumbers(shards: list[Path], without_one: Path):
    data = _data(without_one)
    lengths = [_json(s / "meta/info.json")["total_frames"] for s in (shards[0], shards[2])]
    assert data.column("index").to_pylist() == list(range(sum(lengths)))
    assert data.column("episode_index").to_pylist() == [0] * lengths[0] + [1] * lengths[1]
    assert data.column("frame_index").to_pylist() == list(range(lengths[0])) + list(range(lengths[1]))
    source = pq.read_table(shards[2] / "data/chunk-000/file-002.parquet")
    moved = pq.read_table(without_one / "data/chunk-000/file-001.parquet")
    assert moved.schema == source.schema
    for name in ("ceres.source_frame_index", "ceres.source_timestamp", "ceres.source_gap", "observation.state"):
        assert moved.column(name).equals(source.column(name)), name

    info = _json(without_one / "meta/info.json")
    assert (info["total_episodes"], info["total_frames"], info["splits"]) == (2, sum(lengths), {"train": "0:2"})
    assert _files(without_one) >= {
        "data/chunk-000/file-000.parquet",
        "data/chunk-000/file-001.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "meta/episodes/chunk-000/file-001.parquet",
        f"videos/{VIDEO}/chunk-000/file-000.mp4",
        f"videos/{VIDEO}/chunk-000/file-001.mp4",
        "ceres/episodes/episode-000001/episode-metadata.json",
    }
    assert not any("file-002" in name or "episode-000002" in name for name in _files(without_one))
    assert (without_one / f"videos/{VIDEO}/chunk-000/file-001.mp4").read_bytes() == (
        shards[2] / f"videos/{VIDEO}/chunk-000/file-002.mp4"
    ).read_bytes()
    assert (without_one / "ceres/episodes/episode-000001/source-receipt.json").read_bytes() == (
        shards[2] / "ceres/browser-export-receipt.json"
    ).read_bytes()
    assembly = _json(without_one / "ceres/assembly.json")
    assert [(e["episode_index"], e["source_episode_index"]) for e in assembly["episodes"]] == [(0, 0), (1, 2)]
    assert verify_dataset(without_one) == []


def test_renumbered_episodes_parquet(shards: list[Path], without_one: Path):
    fps = _json(without_one / "meta/info.json")["fps"]
    episodes = _episodes(without_one)
    source_row = pq.read_table(shards[2] / "meta/episodes/chunk-000/file-002.parquet").to_pylist()[0]
    assert (
        pq.read_table(without_one / "meta/episodes/chunk-000/file-001.parquet").schema
        == pq.read_table(shards[2] / "meta/episodes/chunk-000/file-002.parquet").schema
    )
    data = _data(without_one)
    start = 0
    for position, row in enumerate(episodes):
        length = row["length"]
        assert row["episode_index"] == position
        assert (row["dataset_from_index"], row["dataset_to_index"]) == (start, start + length)
        for prefix in ("data", f"videos/{VIDEO}", "meta/episodes"):
            assert (row[f"{prefix}/chunk_index"], row[f"{prefix}/file_index"]) == (0, position)
        assert row[f"videos/{VIDEO}/from_timestamp"] == 0.0
        assert row[f"videos/{VIDEO}/to_timestamp"] == pytest.approx(length / fps, abs=1e-9)
        mp4 = without_one / f"videos/{VIDEO}/chunk-000/file-{position:03d}.mp4"
        assert _frame_count(mp4) == length
        rows = data.slice(start, length)
        for name in ("episode_index", "index"):
            for stat, expected in _expected_stats(_values(rows, name)).items():
                np.testing.assert_allclose(row[f"stats/{name}/{stat}"], expected, err_msg=f"{name} {stat}")
            assert row[f"stats/{name}/count"] == [length]
        start += length
    renumbered = episodes[1]
    unchanged = {k for k in source_row if not k.startswith(("stats/episode_index/", "stats/index/"))}
    unchanged -= {"episode_index", "dataset_from_index", "dataset_to_index"}
    unchanged -= {k for k in source_row if k.endswith(("/chunk_index", "/file_index"))}
    assert {k: renumbered[k] for k in unchanged} == {k: source_row[k] for k in unchanged}
    assert renumbered["stats/index/min"] != source_row["stats/index/min"]


def _refusal(shards: list[Path], tmp_path: Path) -> str:
    out = tmp_path / "refused"
    with pytest.raises(AssemblyError) as refused:
        assemble_dataset(out, shards)
    assert not out.exists() and not list(tmp_path.glob(".refused*"))
    return str(refused.value)


def _label(shard: Path) -> str:
    receipt = _json(shard / "ceres/browser-export-receipt.json")
    return f"episode {receipt['episode_index']} (id {receipt['episode_id']})"


@pytest.mark.parametrize(
    ("spec", "what"),
    [
        ({"rate_hz": 15}, "fps"),
        ({"width": 64, "height": 48}, "camera resolution"),
        ({"camera": "none"}, "feature set"),
    ],
)
def test_disagreeing_shards_are_refused_naming_the_episodes(shards: list[Path], tmp_path: Path, spec: dict, what: str):
    odd = _export_chain(tmp_path, [{"seed": 21, "retries": 0, **spec}], first_index=3)[0]
    message = _refusal([shards[0], shards[1], odd], tmp_path)
    assert f"shards disagree on {what}" in message
    for shard in (shards[0], shards[1], odd):
        assert _label(shard) in message


def test_tampered_shard_is_refused(shards: list[Path], tmp_path: Path):
    tampered = tmp_path / "shards" / shards[1].name
    shutil.copytree(shards[1], tampered)
    data = tampered / "data/chunk-000/file-001.parquet"
    content = bytearray(data.read_bytes())
    content[len(content) // 2] ^= 0x01
    data.write_bytes(bytes(content))
    message = _refusal([shards[0], tampered], tmp_path)
    assert str(tampered) in message
    assert "data/chunk-000/file-001.parquet" in message


def test_duplicate_episode_index_is_refused(shards: list[Path], tmp_path: Path):
    message = _refusal([shards[0], shards[1], shards[1]], tmp_path)
    assert "two shards for episode index 1" in message


def test_task_table_that_is_not_a_prefix_is_refused(shards: list[Path], tmp_path: Path):
    capture = tmp_path / "capture"
    generate_capture(capture, seconds=2, seed=11, retries=0)
    other = export_shard(capture, tmp_path / "shards", episode_index=3, tasks=["A task nobody else has"])
    message = _refusal([shards[0], other.shard_dir], tmp_path)
    assert "meta/tasks.parquet of episode 0" in message and "not a prefix" in message
    assert _label(other.shard_dir) in message


def test_non_empty_output_folder_is_refused(shards: list[Path], tmp_path: Path):
    out = tmp_path / "dataset"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(AssemblyError, match="not empty"):
        assemble_dataset(out, shards)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset"]


def test_empty_output_folder_is_used(shards: list[Path], tmp_path: Path):
    out = tmp_path / "dataset"
    out.mkdir()
    assemble_dataset(out, shards[:1])
    assert verify_dataset(out) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset"]


def test_camera_less_shards_assemble(tmp_path: Path):
    shards = _export_chain(tmp_path, [{"seed": 31, "camera": "none"}, {"seed": 32, "camera": "none"}])
    out = tmp_path / "dataset"
    assemble_dataset(out, shards)
    info = _json(out / "meta/info.json")
    assert info["video_path"] is None and info["total_episodes"] == 2
    assert not (out / "videos").exists()
    assert verify_dataset(out) == []


def test_cli_assemble_and_refusal(shards: list[Path], tmp_path: Path, capsys):
    assert main(["assemble", str(tmp_path / "ok"), *map(str, shards)]) == 0
    assert "assembled 3 episodes" in capsys.readouterr().out
    assert main(["assemble", str(tmp_path / "ok"), *map(str, shards)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not empty" in err and "Traceback" not in err


def test_stats_in_small_dimension_blocks_are_the_same(shards: list[Path], dataset: Path, tmp_path: Path, monkeypatch):
    rows = _json(dataset / "meta/info.json")["total_frames"]
    monkeypatch.setattr("exporter.assemble.STATS_MEMORY_BUDGET", 8 * rows * 7)  # 7 state dimensions per pass
    out = tmp_path / "blocked"
    assemble_dataset(out, shards, created_at=CREATED_AT)
    assert (out / "meta/stats.json").read_bytes() == (dataset / "meta/stats.json").read_bytes()


def test_stats_through_scratch_files_are_the_same(shards: list[Path], dataset: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setattr("exporter.assemble.SCRATCH_MEMORY_BYTES", 0)  # every column through a scratch file
    out = tmp_path / "files"
    assemble_dataset(out, shards, created_at=CREATED_AT)
    assert (out / "meta/stats.json").read_bytes() == (dataset / "meta/stats.json").read_bytes()


def test_failure_while_staging_leaves_nothing(shards: list[Path], tmp_path: Path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("exporter.assemble._dataset_stats", broken)
    with pytest.raises(OSError, match="disk full"):
        assemble_dataset(tmp_path / "dataset", shards)
    assert list(tmp_path.iterdir()) == []


def test_global_index_is_rewritten_when_the_allocation_did_not_start_at_zero(tmp_path: Path):
    capture = generate_capture(tmp_path / "capture", seconds=2, seed=41, camera="none", retries=0)
    shard = export_shard(capture, tmp_path / "shards", episode_index=0, from_index=500).shard_dir
    out = tmp_path / "dataset"
    result = assemble_dataset(out, [shard])
    assert not result.renumbered  # same episode index; only the global index moves
    data = pq.read_table(out / "data/chunk-000/file-000.parquet")
    assert data.column("index").to_pylist() == list(range(data.num_rows))
    row = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()[0]
    assert (row["dataset_from_index"], row["dataset_to_index"]) == (0, data.num_rows)
    assert (row["stats/index/min"], row["stats/index/max"]) == ([0.0], [data.num_rows - 1.0])
    assert _json(out / "meta/stats.json")["index"]["max"] == [data.num_rows - 1.0]


def test_long_renumbered_data_files_are_rewritten_from_the_file_alike(shards: list[Path], without_one: Path,
                                                                      tmp_path: Path, monkeypatch):
    """A data file over the in-memory limit is rewritten whole, a row group at a time, instead of spliced in
    memory: the same rows, schema and statistics, and the receipt still checks it."""
    monkeypatch.setattr("exporter.assemble.SPLICE_MEMORY_BYTES", 0)
    out = tmp_path / "long"
    assemble_dataset(out, [shards[2], shards[0]], created_at=CREATED_AT)
    assert _data(out).equals(_data(without_one))
    assert _data(out).schema.equals(_data(without_one).schema, check_metadata=True)
    assert (out / "meta/stats.json").read_bytes() == (without_one / "meta/stats.json").read_bytes()
    assert _episodes(out) == _episodes(without_one)
    assert verify_dataset(out) == []
    spliced = sorted(without_one.glob("data/*/*.parquet"))[1]
    rewritten = out / spliced.relative_to(without_one)
    assert spliced.read_bytes() != rewritten.read_bytes()  # the two ways really differ in bytes


def test_tampered_data_file_is_refused_when_read_into_memory(shards: list[Path], tmp_path: Path):
    copy = tmp_path / "shard"
    shutil.copytree(shards[2], copy)
    data = next(copy.glob("data/*/*.parquet"))
    raw = bytearray(data.read_bytes())
    raw[100] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(AssemblyError, match="does not match the receipt"):
        assemble_dataset(tmp_path / "out", [copy, shards[0]])  # episode 2 of shard 3 becomes episode 0
    assert not (tmp_path / "out").exists()
