"""Assembling shards that were exported apart (each as episode 0), the episode order options, hard
links, and verification while copying."""

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.assemble import assemble_dataset, verify_dataset
from exporter.cli import main
from exporter.errors import AssemblyError
from exporter.generate import TASKS, generate_capture
from exporter.shard import export_shard
from exporter.stats import QUANTILES

VIDEO = "observation.images.passthrough"
# recorded_at of the three captures: the second is the earliest
RECORDED = [datetime(2026, 5, day, 9, tzinfo=UTC) for day in (3, 1, 2)]


@pytest.fixture(scope="module")
def apart(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three captures, each exported on its own as episode 0, global index 0, with the same task table."""
    root = tmp_path_factory.mktemp("apart")
    shards = []
    for number, recorded_at in enumerate(RECORDED):
        capture = generate_capture(
            root / f"capture-{number}", seconds=2, seed=50 + number, retries=number % 2, recorded_at=recorded_at
        )
        shards.append(export_shard(capture, root / f"shards-{number}", tasks=list(TASKS)).shard_dir)
    return shards


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _ids(shards: list[Path]) -> list[str]:
    return [_json(s / "ceres/browser-export-receipt.json")["episode_id"] for s in shards]


def _data(root: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(p) for p in sorted(root.glob("data/*/*.parquet")))


def test_shards_exported_apart_are_renumbered_in_the_order_given(apart: list[Path], tmp_path: Path):
    given = [apart[2], apart[0], apart[1]]
    result = assemble_dataset(tmp_path / "dataset", given)
    assert result.renumbered
    assembly = _json(tmp_path / "dataset/ceres/assembly.json")["episodes"]
    assert [(e["episode_index"], e["source_episode_index"], e["episode_id"]) for e in assembly] == [
        (i, 0, episode_id) for i, episode_id in enumerate(_ids(given))
    ]
    data = _data(tmp_path / "dataset")
    lengths = [_json(s / "meta/info.json")["total_frames"] for s in given]
    assert data.column("index").to_pylist() == list(range(sum(lengths)))
    assert data.column("episode_index").to_pylist() == [i for i, n in enumerate(lengths) for _ in range(n)]
    for position, shard in enumerate(given):
        moved = tmp_path / f"dataset/ceres/episodes/episode-{position:06d}/episode-metadata.json"
        assert moved.read_bytes() == (shard / "ceres/episode-metadata.json").read_bytes()  # keeps index 0 and id
        mp4 = tmp_path / f"dataset/videos/{VIDEO}/chunk-000/file-{position:03d}.mp4"
        assert mp4.read_bytes() == (shard / f"videos/{VIDEO}/chunk-000/file-000.mp4").read_bytes()
        source = pq.ParquetFile(shard / "data/chunk-000/file-000.parquet")
        written = pq.ParquetFile(tmp_path / f"dataset/data/chunk-000/file-{position:03d}.parquet")
        assert written.schema_arrow == source.schema_arrow
        assert written.metadata.num_row_groups == source.metadata.num_row_groups
    info = _json(tmp_path / "dataset/meta/info.json")
    assert (info["total_episodes"], info["splits"]) == (3, {"train": "0:3"})
    assert verify_dataset(tmp_path / "dataset") == []


def test_statistics_are_exact_over_renumbered_rows(apart: list[Path], tmp_path: Path):
    assemble_dataset(tmp_path / "dataset", apart)
    stats = _json(tmp_path / "dataset/meta/stats.json")
    data = _data(tmp_path / "dataset")
    for name in data.column_names:
        column = data.column(name).combine_chunks()
        if pa.types.is_fixed_size_list(column.type):
            values = column.flatten().to_numpy().reshape(len(column), -1).astype(np.float64)
        else:
            values = column.to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, 1)
        assert stats[name]["count"] == [len(values)]
        np.testing.assert_allclose(stats[name]["mean"], values.mean(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(stats[name]["std"], values.std(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(stats[name]["min"], values.min(axis=0))
        for key, level in QUANTILES.items():
            np.testing.assert_allclose(stats[name][key], np.quantile(values, level, axis=0), rtol=1e-12, atol=1e-12)
    assert stats["index"]["max"] == [len(data) - 1.0]


@pytest.mark.parametrize(("order", "expected"), [("given", [1, 2, 0]), ("index", [1, 2, 0]), ("recorded", [1, 2, 0])])
def test_order_options(apart: list[Path], tmp_path: Path, order: str, expected: list[int]):
    shards = [apart[1], apart[2], apart[0]]  # also the recording order: equal indices keep the order given
    assemble_dataset(tmp_path / "dataset", shards, order=order)
    assembly = _json(tmp_path / "dataset/ceres/assembly.json")["episodes"]
    assert [e["episode_id"] for e in assembly] == [_ids(apart)[i] for i in expected]


def test_order_by_recording_time(apart: list[Path], tmp_path: Path):
    assert main(["assemble", str(tmp_path / "dataset"), *map(str, apart), "--order", "recorded"]) == 0
    assembly = _json(tmp_path / "dataset/ceres/assembly.json")["episodes"]
    assert [e["episode_id"] for e in assembly] == [_ids(apart)[i] for i in (1, 2, 0)]
    with pytest.raises(AssemblyError, match="order must be one of"):
        assemble_dataset(tmp_path / "other", apart, order="random")


def test_the_same_episode_twice_is_refused(apart: list[Path], tmp_path: Path):
    again = export_shard(
        generate_capture(tmp_path / "capture", seconds=2, seed=50, retries=0, recorded_at=RECORDED[0]),
        tmp_path / "shards",
        episode_index=4,
        tasks=list(TASKS),
    ).shard_dir
    with pytest.raises(AssemblyError, match=r"two shards hold the same episode \(id synthetic-0050\)"):
        assemble_dataset(tmp_path / "dataset", [apart[0], again])
    assert not (tmp_path / "dataset").exists()


def test_hard_links_where_the_file_system_allows(apart: list[Path], tmp_path: Path):
    assemble_dataset(tmp_path / "dataset", apart, link=True)
    linked = tmp_path / f"dataset/videos/{VIDEO}/chunk-000/file-001.mp4"
    assert linked.stat().st_ino == (apart[1] / f"videos/{VIDEO}/chunk-000/file-000.mp4").stat().st_ino
    first_data = tmp_path / "dataset/data/chunk-000/file-000.parquet"  # episode 0 keeps its indices
    assert first_data.stat().st_ino == (apart[0] / "data/chunk-000/file-000.parquet").stat().st_ino
    assert verify_dataset(tmp_path / "dataset") == []


def test_a_video_damaged_after_export_is_refused_while_copying(apart: list[Path], tmp_path: Path):
    damaged = tmp_path / "damaged"
    shutil.copytree(apart[1], damaged)
    mp4 = damaged / f"videos/{VIDEO}/chunk-000/file-000.mp4"
    content = bytearray(mp4.read_bytes())
    content[-100] ^= 0xFF
    mp4.write_bytes(bytes(content))
    with pytest.raises(AssemblyError, match=r"shard fails its receipt: videos/.*SHA-256"):
        assemble_dataset(tmp_path / "dataset", [apart[0], damaged])
    assert sorted(os.listdir(tmp_path)) == ["damaged"]


def _without_dates(root: Path) -> dict[str, bytes]:
    """Every file of a dataset but the two that carry the assembly time."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("assembly.json", "dataset-receipt.json")}


def test_a_helper_process_lays_over_the_same_dataset(apart: list[Path], tmp_path: Path, monkeypatch):
    alone = assemble_dataset(tmp_path / "alone", apart, order="given")
    monkeypatch.setattr("exporter.assemble.HELPER_SHARDS", 1)
    monkeypatch.setattr("exporter.assemble._LAY_OVER_THREADS", 0)  # every shard through the helper process
    helped = assemble_dataset(tmp_path / "helped", apart, order="given")
    assert helped.episodes == alone.episodes
    assert _without_dates(tmp_path / "helped") == _without_dates(tmp_path / "alone")
    assert verify_dataset(tmp_path / "helped") == []


def test_a_damaged_shard_is_named_from_the_helper_process(apart: list[Path], tmp_path: Path, monkeypatch):
    damaged = tmp_path / "damaged"
    shutil.copytree(apart[1], damaged)
    mp4 = damaged / f"videos/{VIDEO}/chunk-000/file-000.mp4"
    mp4.write_bytes(mp4.read_bytes()[:-1])
    monkeypatch.setattr("exporter.assemble.HELPER_SHARDS", 1)
    monkeypatch.setattr("exporter.assemble._LAY_OVER_THREADS", 0)
    with pytest.raises(AssemblyError, match=r"shard fails its receipt: videos/.* bytes"):
        assemble_dataset(tmp_path / "dataset", [apart[0], damaged, apart[2]])
    assert sorted(os.listdir(tmp_path)) == ["damaged"]


def test_the_helper_process_dies_with_the_assembling_process(apart: list[Path], tmp_path: Path):
    """SIGKILL of the assembling process (as the drills kill a worker) takes its helper with it."""
    script = (
        "import sys; from pathlib import Path; import exporter.assemble as a; "
        "a.HELPER_SHARDS = 1; a._LAY_OVER_THREADS = 0; "  # the assembling process waits on its helper
        "a.assemble_dataset(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]], order='given')"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "dataset"), *map(str, apart)], env=env,
                              stderr=subprocess.DEVNULL)
    helper = None
    deadline = time.monotonic() + 60
    while helper is None and parent.poll() is None and time.monotonic() < deadline:
        children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
        found = children.read_text().split() if children.exists() else []
        helper = int(found[0]) if found else None
        time.sleep(0.005)
    assert helper is not None, "the helper process was never seen"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{helper}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{helper}/stat").read_text().split(") ")[-1][:1] if Path(f"/proc/{helper}").exists() else ""
        if state == "Z":  # dead, waiting for its (new) parent to reap it
            break
        time.sleep(0.01)
    stat = Path(f"/proc/{helper}/stat")
    assert not stat.exists() or stat.read_text().split(") ")[-1][:1] == "Z"


def test_the_first_damaged_shard_in_dataset_order_is_named(apart: list[Path], tmp_path: Path):
    """Data files are laid over before videos; a damaged video of an earlier shard is still the one named when a
    later shard's data file is damaged too."""
    early, late = tmp_path / "early", tmp_path / "late"
    shutil.copytree(apart[0], early)
    shutil.copytree(apart[2], late)
    mp4 = early / f"videos/{VIDEO}/chunk-000/file-000.mp4"
    mp4.write_bytes(mp4.read_bytes()[:-1])
    data = late / "data/chunk-000/file-000.parquet"
    data.write_bytes(data.read_bytes()[:-1])
    with pytest.raises(AssemblyError, match=r"shard fails its receipt: videos/.* bytes") as failed:
        assemble_dataset(tmp_path / "dataset", [early, apart[1], late], order="given")
    assert failed.value.path == str(early)
    assert sorted(os.listdir(tmp_path)) == ["early", "late"]


def test_statistics_taken_beside_the_laying_over_are_those_taken_after_it(apart: list[Path], tmp_path: Path,
                                                                           monkeypatch):
    beside = assemble_dataset(tmp_path / "beside", apart, order="given")
    monkeypatch.setattr("exporter.assemble._Background.start", lambda self: None)  # taken after, in this thread
    after = assemble_dataset(tmp_path / "after", apart, order="given")
    assert beside.episodes == after.episodes
    assert _without_dates(tmp_path / "beside") == _without_dates(tmp_path / "after")


def _dictionary_encoded(path: Path) -> set[str]:
    """The columns with a dictionary page in some row group (each column here is one parquet leaf)."""
    data = pq.ParquetFile(path)
    names = data.schema_arrow.names
    assert data.metadata.num_columns == len(names)
    return {
        names[j]
        for i in range(data.metadata.num_row_groups)
        for j in range(len(names))
        if data.metadata.row_group(i).column(j).has_dictionary_page
    }


@pytest.mark.parametrize("splice", [True, False], ids=["spliced", "rewritten"])
def test_only_columns_that_repeat_are_dictionary_encoded(apart: list[Path], tmp_path: Path, monkeypatch, splice: bool):
    """Float vectors, times and running indices hardly repeat: exported and assembled data files write them
    plain, and episode_index and task_index with a dictionary."""
    if not splice:  # the assembler's fallback: the whole data file written again
        monkeypatch.setattr("exporter.assemble.replace_column_parts", lambda *args, **kwargs: None)
    for shard in apart:
        assert _dictionary_encoded(shard / "data/chunk-000/file-000.parquet") == {"episode_index", "task_index"}
    assemble_dataset(tmp_path / "dataset", [apart[1], apart[0]])
    for position in range(2):
        path = tmp_path / f"dataset/data/chunk-000/file-{position:03d}.parquet"
        assert _dictionary_encoded(path) == {"episode_index", "task_index"}
