"""exporter.generate: the synthetic recorder writes capture sources that follow capture-source.md.

Everything is read back with json / zipfile / PyAV, not with the exporter's own parser.
"""

import argparse
import hashlib
import itertools
import json
import math
import zipfile
from collections import Counter
from pathlib import Path

import av
import numpy as np
import pytest

from exporter.generate import (
    RAW_CAMERA_DEVICE_ID,
    RAW_USER_AGENT,
    add_arguments,
    bystander_box,
    bystander_frames,
    generate_capture,
    read_frame_code,
    run,
)

RATE = 30
THUMB_TIP, INDEX_TIP = 4, 9


def small(tmp_path: Path, name: str = "capture", **options) -> Path:
    return generate_capture(tmp_path / name, **({"seconds": 4, "width": 64, "height": 48} | options))


def journal(folder: Path) -> list[dict]:
    lines = (folder / "journal.ndjson").read_text(encoding="utf-8").splitlines()
    return [json.loads(line, parse_constant=lambda name: pytest.fail(f"non-finite number {name}")) for line in lines]


def first_records(records: list[dict]) -> tuple[dict[int, dict], list[dict]]:
    """Slot records and segments, replays (equal repeats) removed."""
    slots: dict[int, dict] = {}
    segments: dict[tuple, dict] = {}
    for record in records:
        if record["type"] in ("frame", "gap"):
            assert slots.setdefault(record["slot"], record) == record, "a replay must equal the original"
        elif record["type"] == "segment":
            key = (record["cycle"], record["repetition"], record["take"])
            assert segments.setdefault(key, record) == record
    return slots, sorted(segments.values(), key=lambda s: s["start_slot"])


def stream_types(path: Path) -> list[tuple[str, str]]:
    with av.open(str(path)) as container:
        return [(s.type, s.codec_context.name) for s in container.streams]


def test_journal_records_follow_the_format(tmp_path):
    folder = small(tmp_path, seconds=6)
    records = journal(folder)
    slots, segments = first_records(records)
    frames = [r for r in slots.values() if r["type"] == "frame"]
    assert frames and all(set(r) == {"type", "slot", "t", "head", "left", "right"} for r in frames)

    times = [slots[s]["t"] for s in sorted(slots)]
    assert all(b > a for a, b in itertools.pairwise(times)), "t increases strictly with slot"
    for record in frames:
        if record["head"] is not None:
            assert len(record["head"]["p"]) == 3
            assert math.isclose(np.linalg.norm(record["head"]["q"]), 1.0, abs_tol=1e-5)
        for side in ("left", "right"):
            if record[side] is None:
                continue
            joints = record[side]["joints"]
            assert len(joints) == 25
            for joint in joints:
                if joint is None:
                    continue
                assert len(joint) == 8 and all(math.isfinite(v) for v in joint)
                assert math.isclose(np.linalg.norm(joint[3:7]), 1.0, abs_tol=1e-5)
                assert 0.005 <= joint[7] <= 0.02

    assert {s["outcome"] for s in segments} <= {"success", "completed", "failure", "retry"}
    assert all(s["task"] and s["start_slot"] < s["end_slot"] for s in segments)
    assert all(a["end_slot"] <= b["start_slot"] for a, b in itertools.pairwise(segments))


def test_journal_has_tracking_loss_pinches_gaps_missing_slots_and_replays(tmp_path):
    folder = small(tmp_path, seconds=6)
    records = journal(folder)
    slots, segments = first_records(records)
    frames = [r for r in slots.values() if r["type"] == "frame"]

    assert any(r["left"] is None for r in frames) and any(r["head"] is None for r in frames)
    assert any(r["right"] and None in r["right"]["joints"] for r in frames) or any(
        r["left"] and None in r["left"]["joints"] for r in frames
    )
    assert sum(r["type"] == "gap" for r in slots.values()) >= 2
    retained = [s for s in segments if s["outcome"] != "retry"]
    inside = {slot for s in retained for slot in range(s["start_slot"], s["end_slot"])}
    assert inside - set(slots), "some retained slot has no record at all"
    counts = Counter(json.dumps(r, sort_keys=True) for r in records)
    assert any(r["type"] == "frame" and n > 1 for r, n in ((json.loads(k), n) for k, n in counts.items()))
    assert any(r["type"] == "segment" and n > 1 for r, n in ((json.loads(k), n) for k, n in counts.items()))

    for side in ("left", "right"):
        distances = [
            math.dist(r[side]["joints"][THUMB_TIP][:3], r[side]["joints"][INDEX_TIP][:3])
            for r in frames
            if r[side] and r[side]["joints"][THUMB_TIP] and r[side]["joints"][INDEX_TIP]
        ]
        assert min(distances) < 0.02 and max(distances) > 0.05, f"{side} thumb and index must pinch"
        wrists = {r["slot"]: r[side]["joints"][0][:3] for r in frames if r[side] and r[side]["joints"][0]}
        steps = [math.dist(wrists[s], wrists[s + 1]) for s in wrists if s + 1 in wrists]
        assert 0 < max(steps) < 0.02, "smooth motion between consecutive slots"


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_retries_come_before_a_successful_take(tmp_path, retries):
    _, segments = first_records(journal(small(tmp_path, retries=retries)))
    retry_segments = [s for s in segments if s["outcome"] == "retry"]
    assert len(retry_segments) == retries
    for retry in retry_segments:
        later = [
            s
            for s in segments
            if (s["cycle"], s["repetition"]) == (retry["cycle"], retry["repetition"]) and s["take"] > retry["take"]
        ]
        assert later and later[-1]["outcome"] in ("success", "completed")
    assert len({s["task"] for s in segments}) >= 2


def test_aligned_capture_has_one_camera_frame_per_slot(tmp_path):
    folder = small(tmp_path, retries=0)
    manifest = json.loads((folder / "capture.json").read_text())
    slots, segments = first_records(journal(folder))
    assert segments[0]["start_slot"] == min(slots) == 0
    assert all(a["end_slot"] == b["start_slot"] for a, b in itertools.pairwise(segments))
    assert segments[-1]["end_slot"] == 4 * RATE
    assert manifest["camera"]["first_frame_source_time"] == slots[0]["t"]
    camera = folder / manifest["camera"]["media"]
    assert stream_types(camera) == [("video", "h264")]
    with av.open(str(camera)) as container:
        frames = list(container.decode(video=0))
        assert container.metadata["location"]
    assert len(frames) == 4 * RATE
    assert [read_frame_code(f.to_ndarray(format="rgb24")) for f in frames] == list(range(4 * RATE))
    assert [float(f.pts * f.time_base) for f in frames] == pytest.approx(np.arange(4 * RATE) / RATE)
    pixels = np.stack([f.to_ndarray(format="rgb24") for f in frames[::30]]).astype(float)
    assert pixels.std(axis=0).mean() > 10, "frames must differ from each other"


def test_unaligned_capture_has_idle_slots_and_a_late_camera(tmp_path):
    folder = small(tmp_path, aligned=False, retries=1)
    manifest = json.loads((folder / "capture.json").read_text())
    slots, segments = first_records(journal(folder))
    covered = {slot for s in segments for slot in range(s["start_slot"], s["end_slot"])}
    assert set(slots) - covered, "idle slots outside every segment"
    assert manifest["camera"]["first_frame_source_time"] > slots[min(slots)]["t"] + 1 / RATE


def test_manifest_fields(tmp_path):
    study = {
        "headset_id": "HS-01",
        "demonstrator_id": "",
        "project_id": "P-7",
        "consent_date": "2026-05-01",
        "consent_document_id": "CD-3",
    }
    folder = small(tmp_path, study=study, capture_id="cap-42")
    manifest = json.loads((folder / "capture.json").read_text())
    assert (manifest["schema"], manifest["version"], manifest["capture_id"]) == ("ceres-capture-source", 1, "cap-42")
    assert manifest["recorded_at"].endswith("Z") and manifest["recorder"]["rate_hz"] == RATE
    assert manifest["study"] == study
    camera = manifest["camera"]
    assert (camera["selected"], camera["width"], camera["height"]) == ("passthrough", 64, 48)
    assert camera["device_id"] == RAW_CAMERA_DEVICE_ID
    assert manifest["capture_device"]["user_agent"] == RAW_USER_AGENT
    availability = [v for k, v in manifest["capture_device"].items() if k != "user_agent"]
    availability += list(camera["characteristics"].values())
    assert {v["availability"] for v in availability} == {"known", "unknown", "unavailable"}
    assert all(
        set(v) == ({"availability", "value"} if v["availability"] == "known" else {"availability"})
        for v in availability
    )
    assert manifest["calibration"]["model"] == "pinhole-radtan5"
    assert len(manifest["calibration"]["distortion"]) == 5
    spec = json.loads((folder / manifest["task_specification"]["path"]).read_text(encoding="utf-8"))
    assert spec["version"] == manifest["task_specification"]["version"]
    assert manifest["audio"] == {"microphone_enabled": False, "media": None}

    bare = small(tmp_path, "bare", camera="none", task_spec=False, calibration=False)
    manifest = json.loads((bare / "capture.json").read_text())
    assert manifest["camera"] is None and manifest["task_specification"] is None
    assert manifest["calibration"] is None and not (bare / "media").exists()
    assert not (bare / "task-specification.json").exists()


@pytest.mark.parametrize(
    ("camera", "microphone", "media", "expected"),
    [
        ("mp4", "track", "media/camera.mp4", [("video", "h264"), ("audio", "aac")]),
        ("webm", "track", "media/camera.webm", [("video", "vp9"), ("audio", "opus")]),
        ("webm", "none", None, None),
        ("mp4", "file", "media/microphone.m4a", [("audio", "aac")]),
    ],
)
def test_camera_and_microphone_media(tmp_path, camera, microphone, media, expected):
    folder = small(tmp_path, camera=camera, microphone=microphone, seconds=2, retries=0)
    manifest = json.loads((folder / "capture.json").read_text())
    assert manifest["audio"] == {"microphone_enabled": microphone != "none", "media": media}
    assert manifest["camera"]["media"] == f"media/camera.{camera}"
    if media:
        assert stream_types(folder / media) == expected
    if camera == "webm" and microphone == "none":
        assert stream_types(folder / "media/camera.webm") == [("video", "vp9")]


def test_zip_output_holds_one_top_level_folder(tmp_path):
    archive = small(tmp_path, "zipped", zip_output=True, microphone="file")
    assert archive == tmp_path / "zipped.zip" and not (tmp_path / "zipped").exists()
    with zipfile.ZipFile(archive) as bundle:
        names = set(bundle.namelist())
        assert names == {
            "zipped/capture.json",
            "zipped/journal.ndjson",
            "zipped/task-specification.json",
            "zipped/media/camera.mp4",
            "zipped/media/microphone.m4a",
        }
        manifest = json.loads(bundle.read("zipped/capture.json"))
    assert f"zipped/{manifest['camera']['media']}" in names
    assert [p.name for p in tmp_path.iterdir()] == ["zipped.zip"], "no staging folder is left behind"


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_same_seed_gives_the_same_capture(tmp_path):
    first = digests(small(tmp_path, "a", seed=5, microphone="track"))
    assert first == digests(small(tmp_path, "b", seed=5, microphone="track"))
    other = digests(small(tmp_path, "c", seed=6, microphone="track"))
    assert other["journal.ndjson"] != first["journal.ndjson"]


def test_a_bystander_shows_a_face_the_detector_finds_over_the_middle_half(tmp_path):
    from exporter.faces.detector import detect_image

    folder = small(tmp_path, seconds=2, rate_hz=10, width=160, height=120, retries=0, bystander=True)
    with av.open(str(folder / "media/camera.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert bystander_frames(len(frames)) == range(5, 15)
    # The face stays below the frame-code band: every frame still carries its number.
    assert [read_frame_code(frame) for frame in frames] == list(range(len(frames)))
    for index in (0, 5, 14, 19):
        truth = bystander_box(index, 160, 120, len(frames))
        boxes, _ = detect_image(frames[index])
        if truth is None:
            assert len(boxes) == 0, index
            continue
        assert truth[3] - truth[1] == pytest.approx(40, abs=1) and truth[1] >= 120 // 3
        assert len(boxes) == 1, index
        x0, y0, x1, y1 = boxes[0]
        overlap = max(0, min(x1, truth[2]) - max(x0, truth[0])) * max(0, min(y1, truth[3]) - max(y0, truth[1]))
        assert overlap >= 0.5 * (truth[2] - truth[0]) * (truth[3] - truth[1]), (index, boxes[0], truth)
    # Without a bystander the same seed's pictures show no face.
    plain = small(tmp_path, "plain", seconds=2, rate_hz=10, width=160, height=120, retries=0)
    with av.open(str(plain / "media/camera.mp4")) as container:
        middle = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)][10]
    assert len(detect_image(middle)[0]) == 0


def test_refuses_bad_options_and_existing_output(tmp_path):
    small(tmp_path, "taken", camera="none")
    with pytest.raises(FileExistsError):
        small(tmp_path, "taken", camera="none")
    with pytest.raises(ValueError, match="camera must be one of"):
        small(tmp_path, camera="avi")
    with pytest.raises(ValueError, match="needs a camera file"):
        small(tmp_path, camera="none", microphone="track")
    with pytest.raises(ValueError, match="bystander needs a camera at least 96 pixels high"):
        small(tmp_path, bystander=True)
    with pytest.raises(ValueError, match="too few"):
        small(tmp_path, seconds=0.5, retries=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_command_line(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [str(tmp_path / "cli"), "--seconds", "2", "--camera", "none", "--retries", "2", "--unaligned", "--seed", "9"]
    )
    assert run(args) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cli")
    _, segments = first_records(journal(tmp_path / "cli"))
    assert sum(s["outcome"] == "retry" for s in segments) == 2
    assert run(args) == 2
    assert "already exists" in capsys.readouterr().err
