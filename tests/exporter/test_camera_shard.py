"""A capture with a camera: the mp4 is part of the shard's metadata, statistics and receipt.

Frame timing, codecs and remux fidelity are tested with the video module (test_video.py)."""

import json
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from exporter.cli import main
from exporter.generate import RAW_CAMERA_DEVICE_ID, RAW_USER_AGENT, generate_capture
from exporter.shard import export_shard, read_capture, verify_shard

VIDEO = "observation.images.passthrough"
MP4 = f"videos/{VIDEO}/chunk-000/file-000.mp4"


@pytest.mark.parametrize(
    ("options", "method"),
    [
        ({"camera": "mp4", "retries": 0, "aligned": True}, "remux"),
        ({"camera": "webm", "retries": 1, "aligned": True, "zip_output": True, "microphone": "track"}, "range-aware"),
    ],
)
def test_camera_shard(tmp_path: Path, options: dict, method: str):
    source = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, **options)
    result = export_shard(source, tmp_path / "out")
    shard = result.shard_dir
    assert result.video_method == method
    assert verify_shard(shard) == []

    info = json.loads((shard / "meta" / "info.json").read_text())
    assert list(info["features"])[:3] == ["observation.state", "action", VIDEO]
    feature = info["features"][VIDEO]
    assert feature["dtype"] == "video" and feature["shape"] == [48, 64, 3]
    assert feature["names"] == ["height", "width", "channels"]
    assert feature["info"]["video.codec"] == "h264" and feature["info"]["has_audio"] is False
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"

    length = pq.read_table(shard / "data" / "chunk-000" / "file-000.parquet").num_rows
    assert VIDEO not in pq.read_schema(shard / "data" / "chunk-000" / "file-000.parquet").names
    episodes = pq.read_table(shard / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()[0]
    assert episodes[f"videos/{VIDEO}/chunk_index"] == 0 and episodes[f"videos/{VIDEO}/file_index"] == 0
    assert episodes[f"videos/{VIDEO}/from_timestamp"] == 0.0
    assert episodes[f"videos/{VIDEO}/to_timestamp"] == pytest.approx(length / info["fps"])
    mean = np.array(episodes[f"stats/{VIDEO}/mean"])
    assert mean.shape == (3, 1, 1) and ((mean >= 0) & (mean <= 1)).all()

    stats = json.loads((shard / "meta" / "stats.json").read_text())
    assert list(stats)[:3] == ["observation.state", "action", VIDEO]
    assert np.array(stats[VIDEO]["std"]).shape == (3, 1, 1)

    receipt = json.loads((shard / "ceres" / "browser-export-receipt.json").read_text())
    entry = next(a for a in receipt["artefacts"] if a["path"] == MP4)
    assert entry["media_type"] == "video/mp4"

    with av.open(str(shard / MP4)) as media:
        assert len(media.streams) == 1
        assert sum(1 for _ in media.decode(video=0)) == length

    meta = json.loads((shard / "ceres" / "episode-metadata.json").read_text())
    assert meta["camera"]["selected"] == "passthrough"
    assert (meta["camera"]["width"], meta["camera"]["height"]) == (64, 48)
    assert meta["camera"]["frame_rate"] == pytest.approx(30, rel=0.01)
    assert meta["video"] == {"method": method, "misaligned_rows": 0}
    assert meta["study"]["raw_audio_retained"] is (options.get("microphone") == "track")

    for path in shard.rglob("*"):
        if path.is_file():
            body = path.read_bytes()
            assert RAW_CAMERA_DEVICE_ID.encode() not in body and RAW_USER_AGENT.encode() not in body, path


def test_read_capture_validates_camera_and_microphone_without_writing(tmp_path: Path):
    source = generate_capture(tmp_path / "capture", seconds=1, width=64, height=48, camera="mp4", microphone="file")
    before = sorted(p.name for p in tmp_path.iterdir())
    capture = read_capture(source)
    assert capture.camera_probe.frame_count == 30
    assert capture.audio_in_source is True
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_export_summary_names_the_video_method(tmp_path: Path, capsys):
    source = generate_capture(tmp_path / "capture", seconds=1, width=64, height=48, camera="mp4", retries=0)
    assert main(["export", str(source), str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip().endswith("0 dropped retries, video remux")


def test_generate_subcommand_is_wired_into_the_cli(tmp_path: Path, capsys):
    target = tmp_path / "generated"
    assert main(["generate", str(target), "--seconds", "1", "--camera", "none"]) == 0
    assert (target / "capture.json").is_file() and (target / "journal.ndjson").is_file()
    capsys.readouterr()
    assert main(["export", str(target), str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip().endswith("video none")


def test_video_statistics_of_a_long_shard_sample_its_keyframes(tmp_path: Path):
    # a smart cut: copied GOPs have a keyframe every 2 s, re-encoded ones every second or sooner
    source = generate_capture(tmp_path / "capture", seconds=30, width=64, height=48, retries=1)
    shard = export_shard(source, tmp_path / "out").shard_dir
    with av.open(str(shard / MP4)) as media:
        keyframes = [f.to_ndarray(format="rgb24") for f in media.decode(video=0) if f.key_frame]
    assert len(keyframes) >= 10
    sampled = [keyframes[r] for r in np.round(np.linspace(0, len(keyframes) - 1, min(len(keyframes), 100))).astype(int)]
    values = np.stack(sampled).reshape(-1, 3) / 255.0
    stats = json.loads((shard / "meta" / "stats.json").read_text())[VIDEO]
    assert stats["count"] == [len(sampled)]
    np.testing.assert_allclose(np.ravel(stats["mean"]), values.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(np.ravel(stats["q50"]), np.quantile(values, 0.5, axis=0), rtol=1e-12)
