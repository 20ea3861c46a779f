"""The raw identifiers of a capture source, and the search for them in an exported shard's bytes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.errors import SourceError
from exporter.generate import RAW_CAMERA_DEVICE_ID, RAW_USER_AGENT, generate_capture
from exporter.leaks import capture_identifiers, find_leaks, raw_identifiers
from exporter.shard import export_shard


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("leaks")
    source = generate_capture(folder / "capture", seconds=1.0, rate_hz=15, seed=3, width=32, height=24)
    identifiers = capture_identifiers(source / "capture.json")
    result = export_shard(source, folder / "out")
    return result.shard_dir, identifiers


def test_the_capture_sources_raw_identifiers_are_found_with_their_key_paths(exported):
    _, identifiers = exported
    assert identifiers[RAW_CAMERA_DEVICE_ID] == "camera.device_id"
    assert identifiers[RAW_USER_AGENT] == "capture_device.user_agent"
    assert raw_identifiers({"a": [{"device_id": {"x": "deep-value-1234"}}], "user_agent": None}) == {
        "deep-value-1234": "a[0].device_id"}


def test_capture_identifiers_reads_capture_json_as_the_source_reader_does(tmp_path):
    path = tmp_path / "capture.json"
    path.write_text(json.dumps({"camera": {"device_id": "camera-7f3a9c"}, "capture_device": {"user_agent": None}}))
    assert capture_identifiers(path) == {"camera-7f3a9c": "camera.device_id"}
    path.write_text('{"camera": {"device_id": NaN}}')
    with pytest.raises(SourceError, match=r"^capture\.json: invalid JSON: NaN is not allowed"):
        capture_identifiers(path)
    path.write_text("[" * 100 + "]" * 100)
    with pytest.raises(SourceError, match="nested more than 64 levels deep"):
        capture_identifiers(path)


def test_an_exported_shard_holds_none(exported):
    shard, identifiers = exported
    assert find_leaks(shard, identifiers) == []


def test_a_planted_device_id_in_the_metadata_is_found(exported, tmp_path):
    shard, identifiers = exported
    copy = tmp_path / "shard"
    shutil.copytree(shard, copy)
    metadata = copy / "ceres/episode-metadata.json"
    data = json.loads(metadata.read_text())
    data["camera"]["label"] = f"front ({RAW_CAMERA_DEVICE_ID})"
    metadata.write_text(json.dumps(data))
    assert find_leaks(copy, identifiers) == [
        "ceres/episode-metadata.json: holds the capture source's raw camera.device_id"]
    data["capture_device"]["user_agent"] = "x"
    metadata.write_text(json.dumps(data))
    assert "ceres/episode-metadata.json: holds the key 'user_agent'" in find_leaks(copy, identifiers)


def test_a_user_agent_in_a_parquet_string_column_is_found(exported, tmp_path):
    _, identifiers = exported
    folder = tmp_path / "shard"
    (folder / "meta").mkdir(parents=True)
    pq.write_table(pa.table({"task": ["pick up", f"put down by {RAW_USER_AGENT}"]}), folder / "meta/tasks.parquet")
    assert find_leaks(folder, identifiers) == [
        "meta/tasks.parquet: holds the capture source's raw capture_device.user_agent"]
