"""A capture with a camera: the mp4 is part of the shard's metadata, statistics and receipt.

Frame timing, codecs and remux fidelity are tested with the video module (test_video.py)."""

import json
from datetime import UTC, datetime
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from exporter.cli import main
from exporter.errors import SourceError
from exporter.generate import RAW_CAMERA_DEVICE_ID, RAW_USER_AGENT, generate_capture
from exporter.shard import export_shard, read_capture, verify_shard

VIDEO = "observation.images.passthrough"
MP4 = f"videos/{VIDEO}/chunk-000/file-000.mp4"
AT = datetime(2026, 5, 1, 10, tzinfo=UTC)


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


def _forked_children(monkeypatch) -> list[int]:
    """The pids of the forked processes started from now on (the list fills as they start)."""
    import exporter.forked

    children: list[int] = []
    start = exporter.forked.Child.__init__

    def counted(self, work):
        start(self, work)
        children.append(self.pid)

    monkeypatch.setattr(exporter.forked.Child, "__init__", counted)
    return children


def _shard_files(shard: Path) -> dict[str, bytes]:
    return {p.relative_to(shard).as_posix(): p.read_bytes() for p in sorted(shard.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("camera", ["mp4", "webm"])  # a remux and a re-encode
def test_the_video_made_in_a_forked_process_gives_the_same_shard(tmp_path: Path, monkeypatch, camera: str):
    """A long camera file's video is made in a forked process beside the data table: every file of the shard
    (the receipt with the digest the process took of the video included) is what the thread makes."""
    import exporter.shard

    source = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, camera=camera, retries=1)
    children = _forked_children(monkeypatch)
    at = datetime(2026, 5, 1, 10, tzinfo=UTC)
    thread = export_shard(source, tmp_path / "thread", exported_at=at).shard_dir
    assert children == []  # a short camera file: the thread
    monkeypatch.setattr(exporter.shard, "VIDEO_PROCESS_BYTES", 0)
    process = export_shard(source, tmp_path / "process", exported_at=at).shard_dir
    assert len(children) == 1
    assert _shard_files(process) == _shard_files(thread)
    assert verify_shard(process) == []


def test_a_failed_video_process_is_replaced(tmp_path: Path, monkeypatch):
    """A video process killed half-way (the out-of-memory killer) leaves a staged file behind; the video is
    made again in the exporting process and the shard holds nothing of the first try."""
    import os

    import exporter.shard
    import exporter.video

    source = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, camera="mp4", retries=0)
    expected = _shard_files(export_shard(source, tmp_path / "thread", exported_at=AT).shard_dir)
    parent = os.getpid()
    remux = exporter.video._remux

    def dying(camera_path, display_ranks, fps, out_path):
        if os.getpid() != parent:
            out_path.write_bytes(b"half a video")
            (tmp_path / "died").touch()
            os._exit(9)
        return remux(camera_path, display_ranks, fps, out_path)

    monkeypatch.setattr(exporter.video, "_remux", dying)
    monkeypatch.setattr(exporter.shard, "VIDEO_PROCESS_BYTES", 0)
    shard = export_shard(source, tmp_path / "process", exported_at=AT).shard_dir
    assert (tmp_path / "died").exists()
    assert _shard_files(shard) == expected


def test_a_failing_data_table_stops_the_video_process(tmp_path: Path, monkeypatch):
    """When the data table fails, the video process is killed and reaped, and nothing is left behind."""
    import os
    import signal

    import exporter.forked
    import exporter.shard

    source = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, camera="mp4")
    children = []
    start = exporter.forked.Child.__init__

    def slow(self, work):
        def sleeping():
            signal.pause()  # runs until killed
        start(self, sleeping)
        children.append(self.pid)

    def failing(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(exporter.forked.Child, "__init__", slow)
    monkeypatch.setattr(exporter.shard, "VIDEO_PROCESS_BYTES", 0)
    monkeypatch.setattr(exporter.shard, "_write_data", failing)
    with pytest.raises(OSError, match="No space left"):
        export_shard(source, tmp_path / "out")
    assert len(children) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(children[0], os.WNOHANG)  # already reaped
    assert list((tmp_path / "out").iterdir()) == []


def test_the_probe_beside_the_journal_gives_the_same_capture(tmp_path: Path, monkeypatch):
    """A long camera file is probed in a forked process while the journal is decoded: the capture (probe,
    warnings) is what probing first gives."""
    import exporter.forked
    import exporter.source

    source = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, camera="mp4", retries=0)
    here = read_capture(source)
    children = _forked_children(monkeypatch)
    monkeypatch.setattr(exporter.source, "PROBE_PROCESS_BYTES", 0)
    beside = read_capture(source)
    assert len(children) == 1
    assert beside.warnings == here.warnings
    for field in ("width", "height", "codec", "container", "frame_count", "measured_frame_rate", "has_audio"):
        assert getattr(beside.camera_probe, field) == getattr(here.camera_probe, field)
    assert beside.camera_probe.frame_times.tobytes() == here.camera_probe.frame_times.tobytes()
    assert beside.camera_probe.decode_order_pts.tobytes() == here.camera_probe.decode_order_pts.tobytes()


@pytest.mark.parametrize("fork", [False, True], ids=["here", "forked"])
def test_a_bad_camera_is_reported_before_a_bad_journal(tmp_path: Path, monkeypatch, fork: bool):
    """The probe runs beside the journal, but its error still comes first, as when it ran before it."""
    import exporter.source

    source = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, camera="mp4", retries=0)
    camera = next((source / "media").glob("*.mp4"))
    camera.write_bytes(b"\0" * 4096)  # not a video
    with (source / "journal.ndjson").open("ab") as journal:
        journal.write(b'{"type":"frame","slot":\n{"type":"gap"}\n')  # and a journal in error
    if fork:
        monkeypatch.setattr(exporter.source, "PROBE_PROCESS_BYTES", 0)
    with pytest.raises(SourceError) as raised:
        read_capture(source)
    assert raised.value.path == "media/camera.mp4"
    assert str(raised.value).startswith("media/camera.mp4: not a readable media file")
    assert str(source) not in str(raised.value)  # named as in the capture, not where it lies


def test_a_bad_camera_in_a_zip_is_named_as_in_the_capture(tmp_path: Path):
    """A ZIP source is unpacked into a temporary folder: the error names the file by its place in the capture,
    not by a path of the machine that read it (a portal's upload page shows the message)."""
    import zipfile

    source = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, camera="mp4", retries=0)
    (source / "media/camera.mp4").write_bytes(b"\0" * 4096)
    archive = tmp_path / "capture.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                out.write(path, path.relative_to(source).as_posix())
    with pytest.raises(SourceError) as raised:
        read_capture(archive)
    message = str(raised.value)
    assert message.startswith("media/camera.mp4: not a readable media file")
    assert "'media/camera.mp4'" in message and "/tmp" not in message and "ceres-" not in message
