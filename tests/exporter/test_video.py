"""exporter.video: remux, range-aware re-encode, probing, audio stripping and statistics.

Outputs are read back with PyAV directly. Generated cameras carry their frame number in a band of
black/white cells (exporter.generate), so a decoded frame tells which source frame it came from.
"""

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from exporter.errors import SourceError
from exporter.generate import CameraPictures, generate_capture, read_frame_code, write_camera
from exporter.video import choose_frames, export_video, has_audio_stream, probe_camera, strip_audio, video_stats

RATE = 30


def capture(tmp_path: Path, name: str = "capture", **options) -> tuple[Path, dict]:
    options = {"seconds": 3, "retries": 0, "width": 64, "height": 48} | options
    folder = generate_capture(tmp_path / name, **options)
    return folder, json.loads((folder / "capture.json").read_text())


def video_packets(path: Path) -> list[av.Packet]:
    with av.open(str(path)) as container:
        return [p for p in container.demux(container.streams.video[0]) if p.size]


def decoded(path: Path) -> list[tuple[float, int]]:
    """(presentation time in seconds, frame code) of every decoded frame, in display order."""
    with av.open(str(path)) as container:
        return [
            (float(f.pts * f.time_base), read_frame_code(f.to_ndarray(format="rgb24")))
            for f in container.decode(video=0)
        ]


def nearest_frames(frame_times: np.ndarray, slot_times: np.ndarray) -> np.ndarray:
    """Brute force: the nearest frame for each slot, the earlier one on a tie."""
    return np.array([int(np.argmin(np.round(np.abs(frame_times - t), 9))) for t in slot_times])


def assert_clean_h264(path: Path, rows: int, fps: int = RATE) -> None:
    data = path.read_bytes()
    assert data.index(b"moov") < data.index(b"mdat"), "moov must come first (+faststart)"
    with av.open(str(path)) as container:
        assert len(container.streams) == 1
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert stream.codec_context.pix_fmt == "yuv420p"
        assert not {"title", "location"} & set(container.metadata)
        assert "CERES passthrough camera" not in stream.metadata.values()
        times = [f.pts * f.time_base for f in container.decode(stream)]
    assert len(times) == rows
    assert max(abs(float(t) - r / fps) for r, t in enumerate(times)) < 1e-6


def test_aligned_h264_camera_is_remuxed_packet_for_packet(tmp_path):
    folder, manifest = capture(tmp_path, microphone="track")
    camera = folder / manifest["camera"]["media"]
    with av.open(str(camera)) as source:
        assert source.streams.audio and source.metadata["title"] and source.metadata["location"]
        assert source.streams.video[0].metadata["handler_name"] == "CERES passthrough camera"
    probe = probe_camera(camera)
    slots = manifest["camera"]["first_frame_source_time"] + np.arange(probe.frame_count) / RATE
    out = tmp_path / "out.mp4"

    result = export_video(camera, probe, manifest["camera"]["first_frame_source_time"], slots, True, RATE, out)

    assert (result.method, result.misaligned_rows, result.frame_count) == ("remux", 0, slots.size)
    assert [bytes(p) for p in video_packets(out)] == [bytes(p) for p in video_packets(camera)]
    assert_clean_h264(out, slots.size)
    assert [code for _, code in decoded(out)] == list(range(slots.size))


def test_remux_keeps_b_frame_reordering(tmp_path):
    camera = tmp_path / "bframes.mp4"
    pictures = CameraPictures(64, 48, seed=3)
    with av.open(str(camera), "w") as output:
        stream = output.add_stream("libx264", rate=25, options={"preset": "medium", "bf": "3", "g": "12"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 25)
        for index in range(40):
            frame = av.VideoFrame.from_ndarray(pictures.picture(index), format="yuv420p")
            frame.pts = index
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    packets = video_packets(camera)
    assert any(p.dts != p.pts for p in packets), "the test source must have B-frames"
    probe = probe_camera(camera)
    # A 25 Hz recorder: slot k is at 100 + k/25 s and the camera's first frame at 100 s.
    result = export_video(camera, probe, 100.0, 100.0 + np.arange(40) / 25, True, 25, tmp_path / "out.mp4")

    assert result.method == "remux"
    assert [bytes(p) for p in video_packets(tmp_path / "out.mp4")] == [bytes(p) for p in packets]
    assert_clean_h264(tmp_path / "out.mp4", 40, fps=25)
    assert [code for _, code in decoded(tmp_path / "out.mp4")] == list(range(40))


def test_late_camera_is_reencoded_and_misaligned_rows_counted(tmp_path):
    folder, manifest = capture(tmp_path, aligned=False, retries=1)
    camera = folder / manifest["camera"]["media"]
    probe = probe_camera(camera)
    first = manifest["camera"]["first_frame_source_time"]
    slot0 = json.loads((folder / "journal.ndjson").read_text().splitlines()[0])["t"]
    assert first > slot0 + 0.4
    slots = slot0 + np.arange(5, 85) / RATE  # starts before the camera does
    frame_times = first + probe.frame_times

    result = export_video(camera, probe, first, slots, False, RATE, tmp_path / "out.mp4")

    expected = nearest_frames(frame_times, slots)
    misaligned = int(np.sum(np.abs(frame_times[expected] - slots) > 0.5 / RATE))
    assert misaligned > 5
    assert (result.method, result.misaligned_rows, result.frame_count) == ("range-aware", misaligned, 80)
    assert_clean_h264(tmp_path / "out.mp4", 80)
    assert [code for _, code in decoded(tmp_path / "out.mp4")] == expected.tolist()


@pytest.mark.parametrize("smart_cut", [True, False])
def test_reencoded_video_is_byte_identical_across_runs(tmp_path, smart_cut: bool):
    folder, manifest = capture(tmp_path, seconds=30)
    camera = folder / manifest["camera"]["media"]
    probe = probe_camera(camera)
    first = manifest["camera"]["first_frame_source_time"]
    kept = np.r_[0:20, 37:200, 230:500, 530:740, 770:900]
    outputs = [tmp_path / f"out-{run}.mp4" for run in range(3)]
    for out in outputs:
        export_video(camera, probe, first, first + kept / RATE, False, RATE, out, smart_cut=smart_cut)
    assert len({out.read_bytes() for out in outputs}) == 1


def test_removed_retry_ranges_keep_the_right_frames(tmp_path):
    folder, manifest = capture(tmp_path, retries=2)
    camera = folder / manifest["camera"]["media"]
    probe = probe_camera(camera)
    first = manifest["camera"]["first_frame_source_time"]
    kept = np.r_[0:20, 37:60, 61:90]

    result = export_video(camera, probe, first, first + kept / RATE, False, RATE, tmp_path / "out.mp4")

    assert (result.method, result.misaligned_rows, result.frame_count) == ("range-aware", 0, kept.size)
    assert_clean_h264(tmp_path / "out.mp4", kept.size)
    assert [code for _, code in decoded(tmp_path / "out.mp4")] == kept.tolist()


def test_camera_at_another_rate_picks_nearest_frames(tmp_path):
    camera = tmp_path / "camera.mp4"
    write_camera(camera, kind="mp4", frame_count=50, rate_hz=24, width=64, height=48, with_audio=False, seed=1)
    probe = probe_camera(camera)
    assert probe.measured_frame_rate == pytest.approx(24)
    slots = 7.0 + np.arange(60) / RATE

    result = export_video(camera, probe, 7.0, slots, True, RATE, tmp_path / "out.mp4")

    expected = nearest_frames(7.0 + np.arange(50) / 24, slots)
    assert (result.method, result.misaligned_rows) == ("range-aware", 0)
    assert [code for _, code in decoded(tmp_path / "out.mp4")] == expected.tolist()


def test_nearest_frame_ties_go_to_the_earlier_frame():
    frames = np.array([0.0, 0.1, 0.2])
    assert choose_frames(frames, np.array([0.05, 0.15, 0.149, 0.151, 0.5])).tolist() == [0, 1, 1, 2, 2]


@pytest.mark.parametrize(("kind", "codec", "audio_codec"), [("webm", None, "opus"), ("mp4", "libx265", None)])
def test_other_codecs_are_reencoded_to_silent_h264(tmp_path, kind, codec, audio_codec):
    camera = tmp_path / f"camera.{kind}"
    write_camera(
        camera,
        kind=kind,
        frame_count=30,
        rate_hz=RATE,
        width=64,
        height=48,
        with_audio=audio_codec is not None,
        seed=2,
        codec=codec,
    )
    probe = probe_camera(camera)
    assert probe.codec == {"webm": "vp9", "mp4": "hevc"}[kind]
    assert probe.container == kind
    assert probe.has_audio == (audio_codec is not None)
    slots = 50.0 + np.arange(30) / RATE

    result = export_video(camera, probe, 50.0, slots, True, RATE, tmp_path / "out.mp4")

    assert (result.method, result.misaligned_rows, result.frame_count) == ("range-aware", 0, 30)
    assert_clean_h264(tmp_path / "out.mp4", 30)
    assert [code for _, code in decoded(tmp_path / "out.mp4")] == list(range(30))


def test_odd_dimensions_are_cropped_to_even(tmp_path):
    camera = tmp_path / "odd.webm"
    with av.open(str(camera), "w") as output:
        stream = output.add_stream("libvpx-vp9", rate=RATE, options={"deadline": "realtime", "cpu-used": "8"})
        stream.width, stream.height, stream.pix_fmt = 65, 49, "yuv420p"
        for index in range(6):
            frame = av.VideoFrame.from_ndarray(np.full((49, 65, 3), 40 * index, np.uint8), format="rgb24")
            frame.pts = index
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    probe = probe_camera(camera)
    assert (probe.width, probe.height) == (65, 49)

    export_video(camera, probe, 0.0, np.arange(6) / RATE, True, RATE, tmp_path / "out.mp4")

    with av.open(str(tmp_path / "out.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert [f.shape for f in frames] == [(48, 64, 3)] * 6
    assert [round(f.mean() / 40) for f in frames] == list(range(6))


def test_probe_reads_timing_and_size(tmp_path):
    folder, manifest = capture(tmp_path, aligned=False, retries=1)
    probe = probe_camera(folder / manifest["camera"]["media"])
    assert (probe.width, probe.height, probe.codec, probe.container) == (64, 48, "h264", "mp4")
    assert probe.frame_count == len(video_packets(folder / manifest["camera"]["media"]))
    assert probe.frame_times.dtype == np.float64
    np.testing.assert_allclose(probe.frame_times, np.arange(probe.frame_count) / RATE, atol=1e-9)
    assert probe.measured_frame_rate == pytest.approx(RATE)
    assert not probe.has_audio


def test_probe_rejects_random_bytes_and_audio_only_files(tmp_path):
    junk = tmp_path / "camera.mp4"
    junk.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(SourceError, match=r"camera\.mp4: not a readable media file"):
        probe_camera(junk)
    with pytest.raises(SourceError, match="not a readable media file"):
        probe_camera(tmp_path / "missing.mp4")
    folder, manifest = capture(tmp_path, camera="none", microphone="file")
    microphone = folder / manifest["audio"]["media"]
    with pytest.raises(SourceError, match=r"microphone\.m4a: media file has no video stream"):
        probe_camera(microphone)


def test_truncated_camera_fails_and_leaves_no_file(tmp_path):
    folder, manifest = capture(tmp_path, retries=1)
    camera = folder / manifest["camera"]["media"]
    probe = probe_camera(camera)
    data = camera.read_bytes()
    camera.write_bytes(data[: len(data) // 2])
    out_folder = tmp_path / "videos"
    slots = np.arange(0, probe.frame_count, 2) / RATE

    with pytest.raises(SourceError, match=r"camera\.mp4"):
        export_video(camera, probe, 0.0, slots, False, RATE, out_folder / "out.mp4")

    assert list(out_folder.iterdir()) == []


def test_strip_audio_keeps_video_packets_and_drops_audio(tmp_path):
    folder, manifest = capture(tmp_path, microphone="track")
    camera = folder / manifest["camera"]["media"]
    stripped = tmp_path / "stripped.mp4"

    strip_audio(camera, stripped)

    with av.open(str(stripped)) as container:
        assert not container.streams.audio
        assert len(container.streams.video) == 1
    source_packets, stripped_packets = video_packets(camera), video_packets(stripped)
    assert [bytes(p) for p in stripped_packets] == [bytes(p) for p in source_packets]
    assert [p.pts * p.time_base for p in stripped_packets] == [p.pts * p.time_base for p in source_packets]
    assert probe_camera(stripped).frame_count == probe_camera(camera).frame_count


def test_strip_audio_of_webm(tmp_path):
    folder, manifest = capture(tmp_path, camera="webm", microphone="track")
    camera = folder / manifest["camera"]["media"]
    strip_audio(camera, tmp_path / "stripped.webm")
    with av.open(str(tmp_path / "stripped.webm")) as container:
        assert [s.type for s in container.streams] == ["video"]
    assert [bytes(p) for p in video_packets(tmp_path / "stripped.webm")] == [bytes(p) for p in video_packets(camera)]


def solid_video(path: Path, colours: list[tuple[int, int, int]], size: tuple[int, int], keyint: int = 250) -> None:
    """Lossless H.264, one solid colour per frame, a keyframe exactly every `keyint` frames."""
    width, height = size
    with av.open(str(path), "w") as output:
        options = {"preset": "ultrafast", "qp": "0", "x264-params": f"keyint={keyint}:min-keyint={keyint}:scenecut=0"}
        stream = output.add_stream("libx264", rate=RATE, options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv444p"
        for index, colour in enumerate(colours):
            frame = av.VideoFrame.from_ndarray(np.full((height, width, 3), colour, np.uint8), format="rgb24")
            frame.pts = index
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))


def distinct_colours(count: int) -> list[tuple[int, int, int]]:
    return [(i % 256, (7 * i) % 256, (255 - 3 * i) % 256) for i in range(count)]


def decoded_rgb(path: Path) -> tuple[list[np.ndarray], list[bool]]:
    """Every frame in display order, RGB, and whether it is a keyframe, by a plain full decode."""
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    return [f.to_ndarray(format="rgb24") for f in frames], [f.key_frame for f in frames]


def expected_stats(frames: list[np.ndarray]) -> dict[str, np.ndarray]:
    values = np.stack(frames).reshape(-1, 3).astype(np.float64) / 255.0
    stats = {"min": values.min(0), "max": values.max(0), "mean": values.mean(0), "std": values.std(0)}
    for name, q in {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}.items():
        stats[name] = np.quantile(values, q, axis=0)
    return stats


def assert_stats_of(stats: dict[str, list], frames: list[np.ndarray]) -> None:
    assert stats["count"] == [len(frames)]
    for name, expected in expected_stats(frames).items():
        np.testing.assert_allclose(np.ravel(stats[name]), expected, rtol=0, atol=1e-12, err_msg=name)


def test_video_stats_per_channel_in_unit_range(tmp_path):
    path = tmp_path / "solid.mp4"
    # 150 frames and one keyframe: every frame is decoded and 100 sampled evenly, frames 0..74 dark and
    # 75..149 bright (a 50/50 split of the sample).
    solid_video(path, [(20, 100, 200)] * 75 + [(220, 160, 60)] * 75, (640, 360))

    stats = video_stats(path)

    assert stats["count"] == [100]
    assert set(stats) == {"min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99", "count"}
    for name in set(stats) - {"count"}:
        assert np.array(stats[name]).shape == (3, 1, 1)
        assert np.min(stats[name]) >= 0.0 and np.max(stats[name]) <= 1.0
    dark, bright = np.array([20, 100, 200]) / 255, np.array([220, 160, 60]) / 255
    np.testing.assert_allclose(np.ravel(stats["mean"]), (dark + bright) / 2, atol=0.02)
    np.testing.assert_allclose(np.ravel(stats["std"]), np.abs(bright - dark) / 2, atol=0.02)
    np.testing.assert_allclose(np.ravel(stats["min"]), np.minimum(dark, bright), atol=0.02)
    np.testing.assert_allclose(np.ravel(stats["q10"]), np.minimum(dark, bright), atol=0.02)
    np.testing.assert_allclose(np.ravel(stats["q90"]), np.maximum(dark, bright), atol=0.02)


def test_video_stats_sample_every_frame_of_a_short_video(tmp_path):
    path = tmp_path / "short.mp4"
    solid_video(path, [(0, 0, 0), (255, 255, 255), (0, 0, 0), (255, 255, 255)], (32, 32))
    stats = video_stats(path)
    assert stats["count"] == [4]
    np.testing.assert_allclose(np.ravel(stats["mean"]), [0.5] * 3, atol=0.01)
    np.testing.assert_allclose(np.ravel(stats["q50"]), [0.5] * 3, atol=0.01)


@pytest.mark.parametrize(
    ("frame_count", "keyint", "sampled"),
    [
        (330, 3, "keyframes"),  # 110 keyframes: 100 of them, evenly spread
        (100, 10, "keyframes"),  # 10 keyframes: all of them
        (90, 10, "frames"),  # 9 keyframes: every frame decoded, all 90 sampled
        (270, 30, "frames"),  # 9 keyframes: every frame decoded, 100 sampled evenly
    ],
)
def test_video_stats_sample_evenly_spread_keyframes(tmp_path, frame_count: int, keyint: int, sampled: str):
    path = tmp_path / "video.mp4"
    solid_video(path, distinct_colours(frame_count), (32, 24), keyint=keyint)
    frames, key = decoded_rgb(path)
    assert sum(key) == -(-frame_count // keyint)
    pool = [f for f, k in zip(frames, key, strict=True) if k] if sampled == "keyframes" else frames
    ranks = np.round(np.linspace(0, len(pool) - 1, min(len(pool), 100))).astype(int)
    assert_stats_of(video_stats(path), [pool[r] for r in ranks])


def nal_types(packet: av.Packet) -> list[int]:
    data, types, position = bytes(packet), [], 0
    while position + 4 <= len(data):
        size = int.from_bytes(data[position : position + 4], "big")
        types.append(data[position + 4] & 0x1F)
        position += 4 + size
    return types


@pytest.mark.parametrize(
    ("kept", "copied"),
    [(np.r_[0:60, 70:90], range(60)), (np.r_[0:20, 31:90], range(60, 90)), (np.r_[60:90], range(60, 90))],
)
def test_smart_cut_copies_untouched_gops_and_reencodes_cut_ones(tmp_path, kept, copied):
    # 90 frames, a keyframe every 60: GOPs [0, 60) and [60, 90).
    folder, manifest = capture(tmp_path, retries=1)
    camera = folder / manifest["camera"]["media"]
    probe = probe_camera(camera)
    first = manifest["camera"]["first_frame_source_time"]
    out = tmp_path / "out.mp4"

    result = export_video(camera, probe, first, first + kept / RATE, False, RATE, out)

    assert (result.method, result.misaligned_rows, result.frame_count) == ("range-aware", 0, kept.size)
    assert_clean_h264(out, kept.size)
    assert [code for _, code in decoded(out)] == kept.tolist()
    source_packets = [bytes(p) for p in video_packets(camera)]
    out_packets = video_packets(out)
    copied_rows = [row for row, frame in enumerate(kept) if frame in copied]
    assert [bytes(out_packets[row]) for row in copied_rows] == [source_packets[f] for f in copied]
    reencoded = [bytes(p) for row, p in enumerate(out_packets) if row not in copied_rows]
    assert not set(reencoded) & set(source_packets), "frames of a cut GOP are re-encoded"
    # One SPS/PPS for the whole file: the source's avcC record, and none in-band.
    with av.open(str(camera)) as source, av.open(str(out)) as output:
        assert output.streams.video[0].codec_context.extradata == source.streams.video[0].codec_context.extradata
    assert not {7, 8} & {t for p in out_packets for t in nal_types(p)}


def test_smart_cut_falls_back_to_full_reencode_for_b_frames(tmp_path):
    camera = tmp_path / "bframes.mp4"
    pictures = CameraPictures(64, 48, seed=4)
    with av.open(str(camera), "w") as output:
        stream = output.add_stream("libx264", rate=RATE, options={"preset": "medium", "bf": "2", "g": "10"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(40):
            frame = av.VideoFrame.from_ndarray(pictures.picture(index), format="yuv420p")
            frame.pts = index
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    kept = np.r_[0:20, 25:40]

    export_video(camera, probe_camera(camera), 0.0, kept / RATE, False, RATE, tmp_path / "out.mp4")

    assert [code for _, code in decoded(tmp_path / "out.mp4")] == kept.tolist()
    source_packets = {bytes(p) for p in video_packets(camera)}
    assert not source_packets & {bytes(p) for p in video_packets(tmp_path / "out.mp4")}


def test_smart_cut_falls_back_when_parameter_sets_cannot_be_matched(tmp_path):
    camera = tmp_path / "yuv444.mp4"  # High 4:4:4: an SPS a yuv420p encoder cannot reproduce
    pictures = CameraPictures(64, 48, seed=5)
    with av.open(str(camera), "w") as output:
        stream = output.add_stream("libx264", rate=RATE, options={"preset": "ultrafast", "g": "10"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv444p"
        for index in range(30):
            frame = av.VideoFrame.from_ndarray(pictures.picture(index), format="yuv420p").reformat(format="yuv444p")
            frame.pts = index
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    kept = np.r_[0:10, 15:30]

    export_video(camera, probe_camera(camera), 0.0, kept / RATE, False, RATE, tmp_path / "out.mp4")

    assert_clean_h264(tmp_path / "out.mp4", kept.size)
    assert [code for _, code in decoded(tmp_path / "out.mp4")] == kept.tolist()
    source_packets = {bytes(p) for p in video_packets(camera)}
    assert not source_packets & {bytes(p) for p in video_packets(tmp_path / "out.mp4")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4", "yuv444.mp4"], "no staging file left"


def test_has_audio_stream(tmp_path):
    with_track, manifest = capture(tmp_path, "track", microphone="track")
    silent, _ = capture(tmp_path, "silent")
    lone, lone_manifest = capture(tmp_path, "lone", camera="none", microphone="file")
    assert has_audio_stream(with_track / manifest["camera"]["media"])
    assert not has_audio_stream(silent / "media/camera.mp4")
    assert has_audio_stream(lone / lone_manifest["audio"]["media"])
    (tmp_path / "noise.m4a").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(SourceError, match=r"noise\.m4a: not a readable media file"):
        has_audio_stream(tmp_path / "noise.m4a")


@pytest.mark.parametrize(("offset", "method", "misaligned"), [(0.01, "remux", 0), (0.02, "range-aware", 1)])
def test_half_a_slot_period_decides_alignment(tmp_path, offset, method, misaligned):
    # The camera's first frame is `offset` seconds after slot 0; half a period at 30 Hz is 0.0167 s.
    folder, manifest = capture(tmp_path, seconds=1, retries=0)
    camera = folder / manifest["camera"]["media"]
    probe = probe_camera(camera)
    first = manifest["camera"]["first_frame_source_time"] + offset
    slots = manifest["camera"]["first_frame_source_time"] + np.arange(probe.frame_count) / RATE

    result = export_video(camera, probe, first, slots, True, RATE, tmp_path / "out.mp4")

    assert (result.method, result.misaligned_rows) == (method, misaligned)
    expected = list(range(slots.size)) if method == "remux" else [0, *range(slots.size - 1)]
    assert [code for _, code in decoded(tmp_path / "out.mp4")] == expected
