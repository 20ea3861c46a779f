"""exporter.redact: derived shards whose video has boxes (faces) filled with a solid colour.

Shards come from the synthetic recorder and the exporter (a remuxed camera: a keyframe every 2 s, so
the 6 s episode has three GOPs, frames 0-59, 60-119 and 120-179). Pixels and packets are read back with
PyAV directly.
"""

import hashlib
import itertools
import json
import math
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from exporter.cli import main
from exporter.generate import generate_capture
from exporter.receipt import RECEIPT, verify_shard
from exporter.redact import FILL_YUV, MARGIN, RedactionError, redact_shard
from exporter.shard import export_shard

VIDEO = "videos/observation.images.passthrough/chunk-000/file-000.mp4"
WIDTH, HEIGHT, FRAMES = 160, 120, 180
RECORD = {"detector": "centerface", "weights_sha256": "ab" * 32, "threshold": 0.4, "reviewed_by": "officer-1"}
# first frame, a box partly outside the frame (clamped), two boxes on one frame, the last frame
BOXES = {
    0: [(20.0, 30.0, 60.0, 70.0)],
    10: [(-15.0, -8.0, 25.0, 30.0)],
    40: [(100.0, 50.0, 130.0, 90.0), (5.0, 80.0, 30.0, 110.0)],
    179: [(120.0, 80.0, 150.0, 118.0)],
}


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("redact")
    source = generate_capture(work / "capture", seconds=6, retries=0, width=WIDTH, height=HEIGHT)
    return export_shard(source, work / "out").shard_dir


def digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def packets(path: Path) -> list[tuple[bytes, int, bool]]:
    with av.open(str(path)) as container:
        return [(bytes(p), p.pts, p.is_keyframe) for p in container.demux(video=0) if p.size]


def frames(path: Path) -> tuple[list[np.ndarray], list[int], tuple[int, int]]:
    """Every frame as (Y, U, V) planes stacked in one yuv420p array, their pts, and the stream size."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        decoded = list(container.decode(stream))
        return [f.to_ndarray(format="yuv420p") for f in decoded], [f.pts for f in decoded], (stream.width,
                                                                                            stream.height)


def planes(data: np.ndarray, height: int = HEIGHT, width: int = WIDTH) -> tuple[np.ndarray, np.ndarray]:
    return data[:height].astype(int), data[height:].reshape(2, height // 2, width // 2).astype(int)


def margined(box, width: int = WIDTH, height: int = HEIGHT) -> tuple[int, int, int, int]:
    """The area that must be filled: the box grown by a quarter of its size each side, clamped."""
    x0, y0, x1, y1 = box
    mx, my = 0.25 * (x1 - x0), 0.25 * (y1 - y0)
    return (max(0, math.floor(x0 - mx)), max(0, math.floor(y0 - my)),
            min(width, math.ceil(x1 + mx)), min(height, math.ceil(y1 + my)))


def assert_filled(frame: np.ndarray, box, width: int = WIDTH, height: int = HEIGHT) -> None:
    luma, chroma = planes(frame, height, width)
    x0, y0, x1, y1 = margined(box, width, height)
    error = np.abs(luma[y0:y1, x0:x1] - FILL_YUV[0])
    # codec tolerance: a P-frame codes the new grey area as a residual, a few pixels stray by a few levels
    assert error.max() <= 12 and np.mean(error > 3) < 0.01, f"luma of {box} not filled"
    # chroma (a quarter of the samples) is smoothed a little more across the fill's edge by the codec
    for plane, value in zip(chroma, FILL_YUV[1:], strict=True):
        assert np.abs(plane[y0 // 2 : (y1 + 1) // 2, x0 // 2 : (x1 + 1) // 2] - value).max() <= 8


@pytest.fixture(scope="module")
def redacted(shard, tmp_path_factory) -> tuple[Path, dict[str, str], dict[str, str], object]:
    before = digests(shard)
    dest = tmp_path_factory.mktemp("derived") / "episode-000000"
    result = redact_shard(shard, dest, BOXES, record=dict(RECORD))
    return dest, before, digests(shard), result


def test_margin_is_a_quarter_each_side():
    assert MARGIN == 0.25


def test_boxes_are_filled_on_every_boxed_frame(shard, redacted):
    dest, *_ = redacted
    out, _, _ = frames(dest / VIDEO)
    for frame, boxes in BOXES.items():
        for box in boxes:
            assert_filled(out[frame], box)
    # the clamped box reaches the top-left corner
    luma, _ = planes(out[10])
    assert abs(luma[0, 0] - FILL_YUV[0]) <= 3


def test_untouched_gops_are_copied_and_the_rest_changes_only_by_reencoding(shard, redacted, capsys):
    dest, _, _, result = redacted
    source_packets, out_packets = packets(shard / VIDEO), packets(dest / VIDEO)
    assert len(out_packets) == len(source_packets) == FRAMES
    assert [p[1] for p in out_packets] == [p[1] for p in source_packets]
    # every source GOP still starts with a keyframe (the cut encoder may add one where it sees a scene cut)
    assert [i for i, p in enumerate(source_packets) if p[2]] == [0, 60, 120]
    assert {0, 60, 120} <= {i for i, p in enumerate(out_packets) if p[2]}
    assert [i for i, p in enumerate(out_packets[60:120]) if p[2]] == [0]
    assert [p[0] for p in out_packets[60:120]] == [p[0] for p in source_packets[60:120]]
    assert not {p[0] for p in out_packets[:60] + out_packets[120:]} & {p[0] for p in source_packets}
    assert (result.method, result.gops, result.gops_copied, result.gops_reencoded, result.frames_reencoded) == (
        "smart-cut", 3, 1, 2, 120)
    # outside the boxes, re-encoded frames differ from the source only by coding noise
    src, _, _ = frames(shard / VIDEO)
    out, _, _ = frames(dest / VIDEO)
    outside = np.ones((FRAMES, HEIGHT, WIDTH), dtype=bool)
    for frame, boxes in BOXES.items():
        for box in boxes:
            x0, y0, x1, y1 = margined(box)
            outside[frame, max(0, y0 - 16) : y1 + 16, max(0, x0 - 16) : x1 + 16] = False  # and their neighbours
    diff = np.abs(np.stack([planes(f)[0] for f in out]) - np.stack([planes(f)[0] for f in src]))
    assert diff[60:120].max() == 0, "copied GOPs decode to the same pixels"
    recoded = np.r_[0:60, 120:180]
    noise = diff[recoded][outside[recoded]]
    changed = float(np.mean(noise > 8))
    with capsys.disabled():
        print(f"\nre-encoded GOPs outside the boxes: mean |dY| {noise.mean():.2f}, max {noise.max()}, "
              f"fraction of pixels off by more than 8 levels {changed:.4%}")
    assert noise.mean() < 2.0 and changed < 0.02


def test_progress_follows_the_reencoded_frames_and_leaves_the_shard_unchanged(shard, redacted, tmp_path):
    calls = []
    dest = tmp_path / "episode-000000"
    redact_shard(shard, dest, BOXES, record=dict(RECORD), progress=lambda frame, total: calls.append((frame, total)))
    # GOPs 0 and 2 are re-encoded (frames 0-59 and 120-179), GOP 1 copied: progress names each re-encoded
    # frame's position in the whole video, in order, and nothing for the copied GOP
    assert calls == [(frame, FRAMES) for frame in [*range(1, 61), *range(121, 181)]]
    # the same bytes as without a progress callback, but for the two files that carry the time of the redaction
    dated = {"ceres/redaction.json", RECEIPT}
    assert {name: digest for name, digest in digests(dest).items() if name not in dated} == {
        name: digest for name, digest in digests(redacted[0]).items() if name not in dated}


def test_derived_shard_keeps_frames_timing_and_size_and_verifies(shard, redacted):
    dest, before, after, result = redacted
    src, src_pts, src_size = frames(shard / VIDEO)
    out, out_pts, out_size = frames(dest / VIDEO)
    assert (len(out), out_pts, out_size) == (len(src), src_pts, src_size) == (FRAMES, src_pts, (WIDTH, HEIGHT))
    assert verify_shard(dest) == []
    assert main(["verify", str(dest)]) == 0
    assert before == after, "the original shard is untouched"
    assert verify_shard(shard) == []
    # everything but the video, the statistics of the video, the metadata and the receipt is copied
    derived = digests(dest)
    changed = {name for name in before if derived.get(name) != before[name]}
    assert changed == {VIDEO, RECEIPT, "ceres/episode-metadata.json", "meta/stats.json",
                       "meta/episodes/chunk-000/file-000.parquet"}
    assert set(derived) - set(before) == {"ceres/redaction.json"}
    assert json.loads((dest / "meta/info.json").read_text()) == json.loads((shard / "meta/info.json").read_text())
    stats = json.loads((dest / "meta/stats.json").read_text())["observation.images.passthrough"]
    episodes = pq.read_table(dest / "meta/episodes/chunk-000/file-000.parquet").to_pylist()[0]
    assert episodes["stats/observation.images.passthrough/mean"] == stats["mean"]
    assert result.receipt_sha256 == hashlib.sha256((dest / RECEIPT).read_bytes()).hexdigest()


def test_redaction_record_and_metadata(shard, redacted):
    dest, *_ = redacted
    redaction = json.loads((dest / "ceres/redaction.json").read_text())
    assert {k: redaction[k] for k in RECORD} == RECORD
    assert redaction["boxes_per_frame"] == [[0, 1], [10, 1], [40, 2], [179, 1]]
    assert (redaction["frames"], redaction["frames_with_boxes"], redaction["boxes"]) == (FRAMES, 4, 5)
    assert (redaction["gops_copied"], redaction["gops_reencoded"], redaction["frames_reencoded"]) == (1, 2, 120)
    assert redaction["source_video_sha256"] == hashlib.sha256((shard / VIDEO).read_bytes()).hexdigest()
    assert redaction["source_receipt_sha256"] == hashlib.sha256((shard / RECEIPT).read_bytes()).hexdigest()
    metadata = json.loads((dest / "ceres/episode-metadata.json").read_text())
    original = json.loads((shard / "ceres/episode-metadata.json").read_text())
    assert metadata["video"] == {**original["video"], "redaction": "ceres/redaction.json"}
    assert {k: v for k, v in metadata.items() if k != "video"} == {k: v for k, v in original.items() if k != "video"}


def test_no_boxes_copies_the_video_unchanged(shard, tmp_path):
    result = redact_shard(shard, tmp_path / "plain", {}, record={})
    assert (tmp_path / "plain" / VIDEO).read_bytes() == (shard / VIDEO).read_bytes()
    redaction = json.loads((tmp_path / "plain/ceres/redaction.json").read_text())
    assert (redaction["method"], redaction["boxes"], redaction["gops_copied"], redaction["frames_reencoded"]) == (
        "copy", 0, 3, 0)
    assert (result.method, result.gops_reencoded) == ("copy", 0)
    assert verify_shard(tmp_path / "plain") == []


@pytest.mark.parametrize(
    ("boxes", "message"),
    [
        ({FRAMES: [(1, 1, 5, 5)]}, "frame 180 is beyond the video (frames 0 to 179)"),
        ({3: [(30, 10, 20, 40)]}, "empty or inverted"),
        ({3: [(1, 2, 3)]}, "not four numbers"),
        ({3: [(170, 10, 190, 40)]}, "wholly outside the 160x120 frame"),
        ({3: [(0, 0, float("nan"), 4)]}, "not finite"),
        ({"3": [(1, 1, 5, 5)]}, "is not an integer frame index"),
    ],
)
def test_bad_boxes_are_refused_and_leave_nothing(shard, tmp_path, boxes, message):
    with pytest.raises(RedactionError, match=re.escape(message)):
        redact_shard(shard, tmp_path / "derived", {0: [(1, 1, 5, 5)], **boxes}, record={})
    assert list(tmp_path.iterdir()) == []


def test_a_failure_midway_leaves_no_dest(shard, tmp_path, monkeypatch):
    def broken(path):
        raise OSError("disk full")

    monkeypatch.setattr("exporter.redact.video_stats", broken)
    with pytest.raises(OSError, match="disk full"):
        redact_shard(shard, tmp_path / "derived", BOXES, record={})
    assert list(tmp_path.iterdir()) == []


def test_existing_dest_unverified_source_and_reserved_record_keys_are_refused(shard, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(RedactionError, match="already exists"):
        redact_shard(shard, tmp_path / "taken", {}, record={})
    with pytest.raises(RedactionError, match=r"record cannot be used: \['frames'\]"):
        redact_shard(shard, tmp_path / "derived", {}, record={"frames": 3})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_tampered_source_is_refused(shard, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(shard, copy)
    (copy / "meta/info.json").write_text("{}")
    with pytest.raises(RedactionError, match=r"does not verify: meta/info\.json"):
        redact_shard(copy, tmp_path / "derived", {}, record={})
    assert not (tmp_path / "derived").exists()


def test_command_line(shard, tmp_path, capsys):
    (tmp_path / "boxes.json").write_text(json.dumps({"5": [[10, 10, 30, 30]]}))
    (tmp_path / "record.json").write_text(json.dumps({"reviewed_by": "officer-2"}))
    assert main(["redact", str(shard), str(tmp_path / "cli"), "--boxes", str(tmp_path / "boxes.json"),
                 "--record", str(tmp_path / "record.json")]) == 0
    assert "1 of 180 frames with boxes; smart-cut: 1 of 3 GOPs re-encoded (60 frames)" in capsys.readouterr().out
    assert json.loads((tmp_path / "cli/ceres/redaction.json").read_text())["reviewed_by"] == "officer-2"
    (tmp_path / "bad.json").write_text(json.dumps({"5": [[30, 10, 10, 30]]}))
    assert main(["redact", str(shard), str(tmp_path / "cli2"), "--boxes", str(tmp_path / "bad.json")]) == 2
    assert "frame 5: box [30, 10, 10, 30] is empty or inverted" in capsys.readouterr().err
    assert not (tmp_path / "cli2").exists()


def test_video_with_b_frames_keeps_its_reordering_and_copies_untouched_gops(tmp_path):
    # A late camera is re-encoded by the exporter with B-frames and a keyframe every second (closed GOPs).
    source = generate_capture(tmp_path / "capture", seconds=3, retries=0, width=64, height=48, aligned=False)
    original = export_shard(source, tmp_path / "out").shard_dir
    source_packets = packets(original / VIDEO)
    assert any(b[1] < a[1] for a, b in itertools.pairwise(source_packets)), "B-frames"
    keyframes = [i for i, p in enumerate(source_packets) if p[2]]
    assert len(keyframes) >= 3
    box = (10.0, 10.0, 30.0, 30.0)
    result = redact_shard(original, tmp_path / "derived", {7: [box]}, record={})
    assert (result.method, result.gops_reencoded, result.gops_copied) == ("smart-cut", 1, len(keyframes) - 1)
    src, src_pts, src_size = frames(original / VIDEO)
    out, out_pts, out_size = frames(tmp_path / "derived" / VIDEO)
    assert (len(out), out_pts, out_size) == (len(src), src_pts, src_size)
    assert_filled(out[7], box, *out_size)
    out_packets = packets(tmp_path / "derived" / VIDEO)
    # decode order and presentation times of the copied GOPs are the source's, and their bytes too
    assert out_packets[keyframes[1]:] == source_packets[keyframes[1]:]
    assert verify_shard(tmp_path / "derived") == []
    # a box in every GOP leaves nothing to copy: every frame is re-encoded by the range-aware encoder
    everywhere = {start: [box] for start in keyframes}
    result = redact_shard(original, tmp_path / "all", everywhere, record={})
    assert (result.method, result.gops_copied, result.frames_reencoded) == ("re-encode", 0, len(src))
    out, out_pts, _ = frames(tmp_path / "all" / VIDEO)
    assert out_pts == src_pts
    for start in keyframes:
        assert_filled(out[start], box, *out_size)


def test_a_redacted_shard_assembles_with_its_redaction_record(shard, redacted, tmp_path):
    from exporter.assemble import assemble_dataset, verify_dataset

    dest, *_ = redacted
    assemble_dataset(tmp_path / "dataset", [dest])
    assert verify_dataset(tmp_path / "dataset") == []
    moved = tmp_path / "dataset/ceres/episodes/episode-000000"
    assert (moved / "redaction.json").read_bytes() == (dest / "ceres/redaction.json").read_bytes()
    assert (tmp_path / "dataset" / VIDEO).read_bytes() == (dest / VIDEO).read_bytes()


def test_same_input_and_time_give_a_byte_identical_shard(shard, tmp_path):
    when = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    boxes = {70: [(30.0, 30.0, 60.0, 60.0)]}
    for name in ("one", "two"):
        redact_shard(shard, tmp_path / name, boxes, record=dict(RECORD), created_at=when)
    assert digests(tmp_path / "one") == digests(tmp_path / "two")
    assert json.loads((tmp_path / "one/ceres/redaction.json").read_text())["created_at"] == "2026-06-01T12:00:00Z"


def test_what_a_box_covered_cannot_be_read_back(shard, tmp_path):
    # The generated camera writes each frame's number in black/white cells over the top third. Cover that
    # band on frames 62-66: those frames all read the same value, no longer their numbers, while their
    # neighbours in the same re-encoded GOP still read theirs.
    from exporter.generate import read_frame_code

    band = (0.0, 0.0, float(WIDTH), HEIGHT / 3)
    redact_shard(shard, tmp_path / "derived", {f: [band] for f in range(62, 67)}, record={})
    with av.open(str(tmp_path / "derived" / VIDEO)) as container:
        codes = [read_frame_code(f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
    assert len({codes[f] for f in range(62, 67)}) == 1
    assert not {codes[f] for f in range(62, 67)} & set(range(62, 67))
    assert [codes[f] for f in [*range(60, 62), *range(67, 120)]] == [*range(60, 62), *range(67, 120)]
