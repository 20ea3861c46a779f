"""Outward-camera video for an episode shard: probe, remux or range-aware re-encode, statistics.

Everything goes through PyAV (no ffmpeg binary). The rules are those of capture-source.md section 6
and shard.md sections 6 and 7; docs/video.md records the choices the specs leave open.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from exporter.errors import SourceError

# Mux options of every file we write: moov before mdat, and no muxer version string in the file.
MUX_OPTIONS = {"movflags": "+faststart", "fflags": "+bitexact"}
# Range-aware encoder settings (docs/video.md explains them).
X264_PRESET = "veryfast"
X264_CRF = "20"
STATS_MAX_FRAMES = 100
STATS_TARGET_SIDE = 150
STATS_SEEK_SECONDS = 2
STATS_DOWNSAMPLE_THRESHOLD = 300
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
# Frame/slot distances are compared with this slack so a frame exactly half a period away is aligned.
TIME_EPSILON = 1e-9


@dataclass(frozen=True)
class CameraProbe:
    width: int
    height: int
    codec: str
    container: str
    frame_count: int
    frame_times: np.ndarray
    measured_frame_rate: float | None
    has_audio: bool


@dataclass(frozen=True)
class VideoResult:
    method: str
    misaligned_rows: int
    frame_count: int


@contextmanager
def _open_media(path: Path) -> Iterator[av.container.InputContainer]:
    try:
        container = av.open(str(path), "r")
    except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"not a readable media file ({exc})", path=str(path)) from exc
    try:
        yield container
    finally:
        container.close()


def _container_name(container: av.container.InputContainer) -> str:
    names = container.format.name.split(",")
    if "mp4" in names:
        return "mov" if container.metadata.get("major_brand", "").strip() == "qt" else "mp4"
    if "webm" in names:
        return "webm"
    return names[0]


def _video_stream(container: av.container.InputContainer, path: Path) -> av.video.stream.VideoStream:
    if not container.streams.video:
        raise SourceError("media file has no video stream", path=str(path))
    return container.streams.video[0]


def _video_packets(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream, path: Path
) -> Iterator[av.Packet]:
    """Demuxed packets of `stream` that carry a frame to display (no flush or edit-list discard packets)."""
    try:
        for packet in container.demux(stream):
            if packet.size and not packet.is_discard:
                if packet.pts is None:
                    raise SourceError("video packet without a presentation time", path=str(path))
                yield packet
    except av.FFmpegError as exc:
        raise SourceError(f"cannot read the video stream ({exc})", path=str(path)) from exc


def has_audio_stream(path: Path) -> bool:
    with _open_media(path) as container:
        return bool(container.streams.audio)


def probe_camera(path: Path) -> CameraProbe:
    """Read the camera file's timing from its packets and check that its first frame decodes."""
    with _open_media(path) as container:
        stream = _video_stream(container, path)
        pts = np.fromiter((p.pts for p in _video_packets(container, stream, path)), dtype=np.int64)
        if pts.size == 0:
            raise SourceError("video stream has no frames", path=str(path))
        pts.sort()
        if np.any(np.diff(pts) == 0):
            raise SourceError("video stream has two frames with the same presentation time", path=str(path))
        frame_times = (pts - pts[0]).astype(np.float64) * float(stream.time_base)
        codec = stream.codec_context.name
        container_name = _container_name(container)
        has_audio = bool(container.streams.audio)
    width, height = _first_frame_size(path)
    measured = (pts.size - 1) / frame_times[-1] if pts.size >= 2 else None
    return CameraProbe(
        width=width,
        height=height,
        codec=codec,
        container=container_name,
        frame_count=int(pts.size),
        frame_times=frame_times,
        measured_frame_rate=measured,
        has_audio=has_audio,
    )


def _first_frame_size(path: Path) -> tuple[int, int]:
    with _open_media(path) as container:
        stream = _video_stream(container, path)
        try:
            for frame in container.decode(stream):
                return frame.width, frame.height
        except av.FFmpegError as exc:
            raise SourceError(f"video stream does not decode ({exc})", path=str(path)) from exc
    raise SourceError("video stream does not decode to any frame", path=str(path))


def choose_frames(frame_source_times: np.ndarray, row_slot_times: np.ndarray) -> np.ndarray:
    """Index of the camera frame nearest each row's slot time, the earlier one on a tie."""
    after = np.searchsorted(frame_source_times, row_slot_times, side="left")
    after = np.clip(after, 0, frame_source_times.size - 1)
    before = np.clip(after - 1, 0, None)
    to_before = np.abs(row_slot_times - frame_source_times[before])
    to_after = np.abs(frame_source_times[after] - row_slot_times)
    return np.where(to_before <= to_after + TIME_EPSILON, before, after)


def export_video(
    camera_path: Path,
    probe: CameraProbe,
    first_frame_source_time: float,
    row_slot_times: np.ndarray,
    rows_consecutive: bool,
    fps: int,
    out_path: Path,
) -> VideoResult:
    """Write the episode video: a remux when the camera maps one-to-one onto the rows, else a re-encode."""
    rows = row_slot_times.size
    if rows == 0 or np.any(np.diff(row_slot_times) <= 0):
        raise ValueError("row slot times must be non-empty and strictly increasing")
    half_period = 0.5 / fps
    frame_source_times = first_frame_source_time + probe.frame_times
    chosen = choose_frames(frame_source_times, row_slot_times)
    misaligned = int(np.count_nonzero(np.abs(frame_source_times[chosen] - row_slot_times) > half_period + TIME_EPSILON))
    one_to_one = (
        probe.frame_count == rows
        and rows_consecutive
        and bool(np.all(np.abs(frame_source_times - row_slot_times) <= half_period + TIME_EPSILON))
    )
    display_ranks = None
    if probe.codec == "h264" and probe.container == "mp4" and one_to_one:
        display_ranks = _remux_display_ranks(camera_path)
    with _staged(out_path) as staging:
        if display_ranks is not None:
            _remux(camera_path, display_ranks, fps, staging)
            return VideoResult(method="remux", misaligned_rows=0, frame_count=rows)
        _encode_chosen_frames(camera_path, chosen, fps, staging)
    return VideoResult(method="range-aware", misaligned_rows=misaligned, frame_count=rows)


@contextmanager
def _staged(out_path: Path) -> Iterator[Path]:
    """A temporary path next to `out_path`, renamed onto it on success and removed on failure."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out_path.stem}-", suffix=out_path.suffix, dir=out_path.parent)
    os.close(fd)
    staging = Path(name)
    try:
        yield staging
        os.replace(staging, out_path)
    finally:
        staging.unlink(missing_ok=True)


def _remux_display_ranks(camera_path: Path) -> np.ndarray | None:
    """Display rank of each video packet in decode order; None when the file has edit-list discards."""
    with _open_media(camera_path) as source:
        stream = _video_stream(source, camera_path)
        decode_order_pts = []
        for packet in source.demux(stream):
            if packet.size:
                if packet.is_discard or packet.pts is None:
                    return None
                decode_order_pts.append(packet.pts)
    pts = np.array(decode_order_pts, dtype=np.int64)
    return np.searchsorted(np.sort(pts), pts)


def _remux(camera_path: Path, display_ranks: np.ndarray, fps: int, out_path: Path) -> None:
    """Copy the video packets unchanged, retimed so frame r is at r/fps; drop every other stream."""
    # Decode index minus display rank is how far a packet is decoded ahead of being shown (B-frames);
    # shifting every dts back by the largest such lead keeps dts <= pts and dts strictly increasing.
    reorder_delay = int(max(0, np.max(np.arange(display_ranks.size) - display_ranks)))
    time_base = Fraction(1, fps)
    with _open_media(camera_path) as source, _open_output(out_path) as output:
        stream = _video_stream(source, camera_path)
        target = output.add_stream_from_template(stream)
        target.time_base = time_base
        target.metadata.clear()
        for decode_index, packet in enumerate(_video_packets(source, stream, camera_path)):
            packet.pts = int(display_ranks[decode_index])
            packet.dts = decode_index - reorder_delay
            packet.duration = 1
            packet.time_base = time_base
            packet.stream = target
            output.mux(packet)


@contextmanager
def _open_output(path: Path, format_name: str = "mp4") -> Iterator[av.container.OutputContainer]:
    output = av.open(str(path), "w", format=format_name, options=dict(MUX_OPTIONS))
    try:
        yield output
    finally:
        output.close()


def _encode_chosen_frames(camera_path: Path, chosen: np.ndarray, fps: int, out_path: Path) -> None:
    """Encode decoded frame chosen[r] as output frame r, decoding the camera once, front to back."""
    with _open_media(camera_path) as source, _open_output(out_path) as output:
        stream = _video_stream(source, camera_path)
        stream.thread_type = "AUTO"
        encoder = None
        row = 0
        frame_index = -1
        try:
            for frame in source.decode(stream):
                frame_index += 1
                if chosen[row] != frame_index:
                    continue
                if encoder is None:
                    encoder = _add_h264_stream(output, frame.width, frame.height, fps)
                picture = _even_yuv420p(frame, encoder.width, encoder.height)
                picture.time_base = encoder.codec_context.time_base
                while row < chosen.size and chosen[row] == frame_index:
                    picture.pts = row
                    output.mux(encoder.encode(picture))
                    row += 1
                if row == chosen.size:
                    break
        except av.FFmpegError as exc:
            raise SourceError(f"video stream does not decode ({exc})", path=str(camera_path)) from exc
        if row < chosen.size:
            raise SourceError(
                f"video stream decoded to {frame_index + 1} frames, fewer than its packets "
                f"promised (frame {int(chosen[row])} needed)",
                path=str(camera_path),
            )
        output.mux(encoder.encode(None))


def _add_h264_stream(
    output: av.container.OutputContainer, width: int, height: int, fps: int
) -> av.video.stream.VideoStream:
    encoder = output.add_stream(
        "libx264", rate=fps, options={"preset": X264_PRESET, "crf": X264_CRF, "g": str(fps), "bf": "2"}
    )
    # yuv420p needs even dimensions: an odd last row or column is cropped away.
    encoder.width = width - width % 2
    encoder.height = height - height % 2
    encoder.pix_fmt = "yuv420p"
    encoder.time_base = Fraction(1, fps)
    encoder.codec_context.time_base = Fraction(1, fps)
    return encoder


def _even_yuv420p(frame: av.VideoFrame, width: int, height: int) -> av.VideoFrame:
    if (
        (frame.width - frame.width % 2, frame.height - frame.height % 2)
        == (width, height)
        != (frame.width, frame.height)
    ):
        rgb = frame.to_ndarray(format="rgb24")[:height, :width]
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    if frame.format.name == "yuv420p" and (frame.width, frame.height) == (width, height):
        picture = frame
    else:  # also rescales a frame after a mid-stream resolution change
        picture = frame.reformat(width=width, height=height, format="yuv420p")
    picture.pict_type = av.video.frame.PictureType.NONE
    return picture


def strip_audio(src: Path, dst: Path) -> None:
    """Write `src` to `dst` keeping only its video stream(s), packets and timestamps unchanged."""
    with _open_media(src) as source:
        if not source.streams.video:
            raise SourceError("media file has no video stream", path=str(src))
        format_name = _container_name(source)
        with _staged(dst) as staging, _open_output(staging, format_name) as output:
            output.metadata.update(source.metadata)
            targets = {}
            for stream in source.streams.video:
                target = output.add_stream_from_template(stream)
                target.metadata.update(stream.metadata)
                targets[stream.index] = target
            try:
                for packet in source.demux(*source.streams.video):
                    if packet.size:
                        packet.stream = targets[packet.stream_index]
                        output.mux(packet)
            except av.FFmpegError as exc:
                raise SourceError(f"cannot read the video stream ({exc})", path=str(src)) from exc


def stats_sample_indices(frame_count: int) -> np.ndarray:
    """Evenly spaced frame indices, first and last included, at most STATS_MAX_FRAMES of them."""
    count = min(frame_count, STATS_MAX_FRAMES)
    return np.unique(np.round(np.linspace(0, frame_count - 1, count)).astype(np.int64))


def _downsample(rgb: np.ndarray) -> np.ndarray:
    """LeRobot's rule (auto_downsample_height_width): stride so the longer side is about 150 px."""
    height, width = rgb.shape[:2]
    if max(height, width) < STATS_DOWNSAMPLE_THRESHOLD:
        return rgb
    step = max(height, width) // STATS_TARGET_SIDE
    return rgb[::step, ::step].copy()  # a copy, so the full-size frame is freed


def _sampled_frames(mp4_path: Path) -> Iterator[np.ndarray]:
    with _open_media(mp4_path) as container:
        stream = _video_stream(container, mp4_path)
        display_pts = np.sort(np.fromiter((p.pts for p in _video_packets(container, stream, mp4_path)), dtype=np.int64))
        targets = display_pts[stats_sample_indices(display_pts.size)]
        stream.thread_type = "AUTO"
        frames = None
        position = None  # pts of the last decoded frame
        for target in targets:
            # Seek only across a long stretch; nearby targets are reached by decoding forward.
            if frames is None or (target - position) * stream.time_base > STATS_SEEK_SECONDS:
                container.seek(int(target), backward=True, stream=stream)
                frames = container.decode(stream)
            for frame in frames:
                position = frame.pts
                if frame.pts >= target:
                    yield _downsample(frame.to_ndarray(format="rgb24"))
                    break


def video_stats(mp4_path: Path) -> dict[str, list]:
    """Per-channel RGB statistics in [0, 1] over a sample of decoded frames, each shaped (3, 1, 1)."""
    frames = list(_sampled_frames(mp4_path))
    if not frames:
        raise SourceError("video has no frames to sample", path=str(mp4_path))
    names = ["min", "max", "mean", "std", *QUANTILES]
    per_channel = []
    for channel in range(3):
        values = np.concatenate([f[..., channel].ravel() for f in frames]).astype(np.float64) / 255.0
        per_channel.append([values.min(), values.max(), values.mean(), values.std(),
                            *np.quantile(values, list(QUANTILES.values()))])
    stats: dict[str, list] = {
        name: [[[float(per_channel[channel][i])]] for channel in range(3)] for i, name in enumerate(names)}
    stats["count"] = [len(frames)]
    return stats
