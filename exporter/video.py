"""Outward-camera video for an episode shard: probe, remux or range-aware re-encode, statistics.

Everything goes through PyAV (no ffmpeg binary). The rules are those of capture-source.md section 6
and shard.md sections 6 and 7; docs/video.md records the choices the specs leave open.
"""

from __future__ import annotations

import os
import re
import tempfile
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from exporter.errors import SourceError
from exporter.modes import FILE_MODE
from exporter.stats import image_stats

# Mux options of every file we write: moov before mdat, and no muxer version string in the file.
MUX_OPTIONS = {"movflags": "+faststart", "fflags": "+bitexact"}
# Range-aware encoder settings (docs/video.md explains them).
X264_PRESET = "veryfast"
X264_CRF = "20"
# The redaction's re-encoded GOPs (redact_video): x264's next faster preset, about 0.6 of veryfast's CPU time
# at the same CRF; the SPS/PPS-shaping options still come from the source (docs/video.md, "Redacted video").
REDACT_X264_PRESET = "superfast"
# x264's macroblock-tree rate control makes output differ from run to run on identical input (seen
# with one thread too); without it repeated exports are byte-identical.
X264_REPEATABLE = "mbtree=0"
STATS_MAX_FRAMES = 100
STATS_MIN_KEYFRAMES = 10  # fewer keyframes than this: sample all frames (short clips, long GOPs)
STATS_TARGET_SIDE = 150
STATS_DOWNSAMPLE_THRESHOLD = 300
# x264 SEI option -> x264-params name, for the options that shape the SPS/PPS (smart cut).
X264_PARAMS = {
    "cabac": "cabac",
    "ref": "ref",
    "8x8dct": "8x8dct",
    "bframes": "bframes",
    "weightp": "weightp",
    "keyint": "keyint",
    "keyint_min": "min-keyint",
    "interlaced": "interlaced",
    "constrained_intra": "constrained-intra",
    "chroma_qp_offset": "chroma-qp-offset",
    "crf": "crf",  # x264 derives the PPS's initial QP from it
}
NAL_IDR, NAL_SEI, NAL_SPS, NAL_PPS, NAL_AUD = 5, 6, 7, 8, 9
PARAMETER_SET_NALS = (NAL_SPS, NAL_PPS, NAL_AUD)
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
    # presentation times of the packets in decode order (the remux's display ranks come from them);
    # None when the file has edit-list discard packets, which a remux does not copy
    decode_order_pts: np.ndarray | None = None


@dataclass(frozen=True)
class VideoResult:
    method: str
    misaligned_rows: int
    frame_count: int


@dataclass(frozen=True)
class CutResult:
    """What a smart cut did: GOPs copied packet for packet, GOPs and frames re-encoded."""

    gops_copied: int
    gops_reencoded: int
    frames_reencoded: int


# Called with (output frame index, decoded frame) for every frame that is re-encoded; returns the picture
# to encode (yuv420p, same size).
FrameTransform = Callable[[int, av.VideoFrame], av.VideoFrame]


@dataclass(frozen=True)
class RedactedVideo:
    """`redact_video`'s outcome: `smart-cut` (only the GOPs holding a touched frame re-encoded) or
    `re-encode` (every frame, when the video does not allow a safe cut)."""

    method: str
    frame_count: int
    gops: int
    gops_copied: int
    gops_reencoded: int
    frames_reencoded: int


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


def _data_packets(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream, path: Path
) -> Iterator[av.Packet]:
    """Demuxed packets of `stream` that carry data (the demuxer's empty flush packet left out)."""
    try:
        for packet in container.demux(stream):
            if packet.size:
                yield packet
    except av.FFmpegError as exc:
        raise SourceError(f"cannot read the video stream ({exc})", path=str(path)) from exc


def _video_packets(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream, path: Path
) -> Iterator[av.Packet]:
    """Packets of `stream` that carry a frame to display (no edit-list discard packets)."""
    for packet in _data_packets(container, stream, path):
        if not packet.is_discard:
            if packet.pts is None:
                raise SourceError("video packet without a presentation time", path=str(path))
            yield packet


def _display_pts(camera_path: Path) -> np.ndarray:
    """Presentation times (stream time base) of the frames to display, in display order."""
    with _open_media(camera_path) as source:
        stream = _video_stream(source, camera_path)
        return np.sort(np.fromiter((p.pts for p in _video_packets(source, stream, camera_path)), dtype=np.int64))


def has_audio_stream(path: Path) -> bool:
    with _open_media(path) as container:
        return bool(container.streams.audio)


def probe_camera(path: Path) -> CameraProbe:
    """Read the camera file's timing from its packets and check that its first frame decodes."""
    with _open_media(path) as container:
        stream = _video_stream(container, path)
        decode_order = array("q")
        discards = False
        for packet in _data_packets(container, stream, path):  # the one pass over the packets
            if packet.is_discard:
                discards = True
                continue
            if packet.pts is None:
                raise SourceError("video packet without a presentation time", path=str(path))
            decode_order.append(packet.pts)
        decode_order_pts = np.frombuffer(decode_order, dtype=np.int64)
        pts = np.sort(decode_order_pts)
        if pts.size == 0:
            raise SourceError("video stream has no frames", path=str(path))
        if np.any(np.diff(pts) == 0):
            raise SourceError("video stream has two frames with the same presentation time", path=str(path))
        frame_times = (pts - pts[0]).astype(np.float64) * float(stream.time_base)
        codec = stream.codec_context.name
        container_name = _container_name(container)
        has_audio = bool(container.streams.audio)
    width, height = _first_frame_size(path)
    measured = float((pts.size - 1) / frame_times[-1]) if pts.size >= 2 else None
    return CameraProbe(
        width=width,
        height=height,
        codec=codec,
        container=container_name,
        frame_count=int(pts.size),
        frame_times=frame_times,
        measured_frame_rate=measured,
        has_audio=has_audio,
        decode_order_pts=None if discards else decode_order_pts,
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
    *,
    smart_cut: bool = True,
) -> VideoResult:
    """Write the episode video: a remux when the camera maps one-to-one onto the rows, else a re-encode.

    With `smart_cut`, an H.264 MP4 camera whose rows only skip whole frame ranges keeps its untouched
    GOPs as they are and only the GOPs a cut passes through are re-encoded (when that is safe).
    """
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
        display_ranks = _remux_display_ranks(probe)
    with _staged(out_path) as staging:
        if display_ranks is not None:
            _remux(camera_path, display_ranks, fps, staging)
            return VideoResult(method="remux", misaligned_rows=0, frame_count=rows)
        cuttable = smart_cut and misaligned == 0 and probe.codec == "h264" and probe.container == "mp4"
        if not (cuttable and _smart_cut(camera_path, chosen, fps, staging)):
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
        staging.chmod(FILE_MODE)
        os.replace(staging, out_path)
    finally:
        staging.unlink(missing_ok=True)


def decode_order_pts(path: Path) -> np.ndarray | None:
    """Presentation times of the video packets in decode order; None when the file has edit-list
    discards (what ``probe_camera`` records, read again for a file rewritten since)."""
    with _open_media(path) as source:
        stream = _video_stream(source, path)
        pts = []
        for packet in _data_packets(source, stream, path):
            if packet.is_discard or packet.pts is None:
                return None
            pts.append(packet.pts)
    return np.array(pts, dtype=np.int64)


def _remux_display_ranks(probe: CameraProbe) -> np.ndarray | None:
    """Display rank of each video packet in decode order (from the probe's pass over the packets);
    None when the file has edit-list discards."""
    pts = probe.decode_order_pts
    if pts is None:
        return None
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


@dataclass(frozen=True)
class _GopLayout:
    gop_starts: np.ndarray  # frame index of each keyframe
    frame_count: int
    x264_settings: dict[str, str]  # from the x264 SEI of the first frame; empty for other encoders
    # with reordered frames (B-frames): display rank of each packet in decode order, and the largest
    # lead of decoding over display (docs/video.md, remux); None and 0 when frames are shown in decode order
    display_ranks: np.ndarray | None = None
    reorder_delay: int = 0


def _nal_units(payload: bytes, length_size: int) -> Iterator[bytes]:
    """NAL units of a length-prefixed (MP4) H.264 access unit."""
    position = 0
    while position + length_size <= len(payload):
        size = int.from_bytes(payload[position : position + length_size], "big")
        yield payload[position + length_size : position + length_size + size]
        position += length_size + size


def _annexb_nal_units(data: bytes) -> list[bytes]:
    """NAL units of an Annex B byte stream (start-code separated), trailing zero bytes removed."""
    return [unit.rstrip(b"\0") for unit in re.split(b"\0\0\1", data) if unit.rstrip(b"\0")]


def _avcc_parameter_sets(extradata: bytes) -> tuple[int, list[bytes]]:
    """NAL length size and the SPS and PPS units of an avcC record (ISO/IEC 14496-15)."""
    length_size = (extradata[4] & 3) + 1
    units, position = [], 5
    for count_mask in (0x1F, 0xFF):
        count = extradata[position] & count_mask
        position += 1
        for _ in range(count):
            size = int.from_bytes(extradata[position : position + 2], "big")
            units.append(extradata[position + 2 : position + 2 + size])
            position += 2 + size
    return length_size, units


def _gop_layout(camera_path: Path, length_size: int, *, reordered: bool = False) -> _GopLayout | None:
    """Where the GOPs start; None unless every frame is shown in decode order and every GOP opens on an IDR.

    With `reordered`, frames may be shown out of decode order (B-frames) as long as every GOP is closed:
    the frames of each GOP are shown in one run, between those of the GOPs before and after it.
    """
    all_pts = []
    with _open_media(camera_path) as source:
        stream = _video_stream(source, camera_path)
        keyframes, previous_pts, index, settings = [], None, 0, {}
        for packet in _data_packets(source, stream, camera_path):
            if packet.is_discard or packet.pts is None:
                return None
            if not reordered and previous_pts is not None and packet.pts <= previous_pts:
                return None
            all_pts.append(packet.pts)
            if packet.is_keyframe:
                units = list(_nal_units(bytes(packet), length_size))
                if not any(unit and unit[0] & 0x1F == NAL_IDR for unit in units):
                    return None
                if index == 0:
                    settings = _x264_settings(units)
                keyframes.append(index)
            previous_pts = packet.pts
            index += 1
    if not keyframes or keyframes[0] != 0:
        return None
    pts = np.array(all_pts, dtype=np.int64)
    if not reordered or np.all(np.diff(pts) > 0):
        return _GopLayout(gop_starts=np.array(keyframes), frame_count=index, x264_settings=settings)
    if np.unique(pts).size != pts.size:
        return None
    ranks = np.searchsorted(np.sort(pts), pts)
    ends = [*keyframes[1:], index]
    if any(not np.array_equal(np.sort(ranks[a:b]), np.arange(a, b)) for a, b in zip(keyframes, ends, strict=True)):
        return None  # an open GOP: a frame shown across a keyframe
    delay = int(max(0, np.max(np.arange(index) - ranks)))
    return _GopLayout(np.array(keyframes), index, settings, display_ranks=ranks, reorder_delay=delay)


def _x264_settings(units: list[bytes]) -> dict[str, str]:
    """The option string x264 writes into an SEI of its first frame, as a dict."""
    for unit in units:
        if unit and unit[0] & 0x1F == NAL_SEI and b"options: " in unit:
            text = unit.split(b"options: ", 1)[1].split(b"\0", 1)[0].decode("ascii", "replace")
            return dict(item.split("=", 1) for item in text.split() if "=" in item)
    return {}


def _cut_encoder(
    layout: _GopLayout, stream: av.video.stream.VideoStream, fps: int, preset: str = X264_PRESET
) -> av.CodecContext | None:
    """An x264 encoder whose SPS/PPS equal the source's, so its GOPs can sit between copied ones."""
    params = [f"{X264_PARAMS[key]}={value}" for key, value in layout.x264_settings.items() if key in X264_PARAMS]
    encoder = av.CodecContext.create("libx264", "w")
    encoder.width, encoder.height, encoder.pix_fmt = stream.width, stream.height, "yuv420p"
    encoder.time_base, encoder.framerate = Fraction(1, fps), Fraction(fps)
    encoder.flags |= av.codec.context.Flags.global_header
    encoder.options = {"preset": preset, "crf": X264_CRF, "x264-params": ":".join([*params, X264_REPEATABLE])}
    try:
        encoder.open()
    except av.FFmpegError:
        return None
    _, source_sets = _avcc_parameter_sets(bytes(stream.codec_context.extradata))
    encoder_sets = [u for u in _annexb_nal_units(bytes(encoder.extradata)) if u[0] & 0x1F in (NAL_SPS, NAL_PPS)]
    return encoder if encoder_sets == source_sets else None


class _ReorderTooDeep(Exception):
    """A re-encoded GOP shows a frame later after decoding it than the copied GOPs' timeline allows."""


def _smart_cut(
    camera_path: Path,
    chosen: np.ndarray,
    fps: int,
    out_path: Path,
    *,
    touched: np.ndarray | None = None,
    transform: FrameTransform | None = None,
    preset: str = X264_PRESET,
) -> CutResult | None:
    """Copy the GOPs whose frames all stay, re-encode the kept frames of the GOPs a cut passes through.

    `touched` (sorted source frame indices) sends the GOPs holding them to the re-encode even when all
    their frames stay; `transform` is applied to every re-encoded frame (the redaction's fill); `preset` is
    the re-encoding x264's.
    Returns None, having written nothing useful, when the camera does not allow a safe cut: a frame
    repeats, frames are reordered (B-frames), a GOP does not open on an IDR, no GOP survives whole, or
    x264 cannot reproduce the source's SPS/PPS (one avcC record must describe every frame).
    """
    if np.any(np.diff(chosen) <= 0):
        return None
    with _open_media(camera_path) as source:
        extradata = bytes(_video_stream(source, camera_path).codec_context.extradata or b"")
    if len(extradata) < 7 or extradata[0] != 1:
        return None
    length_size, _ = _avcc_parameter_sets(extradata)
    # B-frames are taken only when every frame stays (a redaction): then each GOP's frames keep their places
    keep_all = bool(chosen.size) and chosen[0] == 0 and chosen[-1] == chosen.size - 1
    layout = _gop_layout(camera_path, length_size, reordered=keep_all)
    if layout is None:
        return None
    ranks, delay = layout.display_ranks, layout.reorder_delay
    gop_ends = np.append(layout.gop_starts[1:], layout.frame_count)
    kept = np.searchsorted(chosen, gop_ends) - np.searchsorted(chosen, layout.gop_starts)
    whole = kept == gop_ends - layout.gop_starts
    if touched is not None and touched.size:
        whole &= np.searchsorted(touched, gop_ends) == np.searchsorted(touched, layout.gop_starts)
    if not whole.any():
        return None
    cut_gops = (kept > 0) & ~whole
    if cut_gops.any():
        with _open_media(camera_path) as source:
            if _cut_encoder(layout, _video_stream(source, camera_path), fps, preset) is None:
                return None
    time_base = Fraction(1, fps)
    with _open_media(camera_path) as source, _open_output(out_path) as output:
        stream = _video_stream(source, camera_path)
        target = output.add_stream_from_template(stream)
        target.time_base = time_base
        target.metadata.clear()
        decoder = stream.codec_context
        encoder = None
        row = 0
        frame_index = 0  # display index of the next frame the decoder returns

        def mux(packet: av.Packet) -> None:
            packet.duration = 1
            packet.time_base = time_base
            packet.stream = target
            output.mux(packet)

        decode_index = 0  # of the next re-encoded packet, in the output (used with B-frames only)

        def mux_encoded(packets: list[av.Packet]) -> None:
            nonlocal decode_index
            for encoded in packets:
                units = [u for u in _annexb_nal_units(bytes(encoded)) if u[0] & 0x1F not in PARAMETER_SET_NALS]
                packet = av.Packet(b"".join(len(u).to_bytes(length_size, "big") + u for u in units))
                packet.pts = packet.dts = encoded.pts
                if ranks is not None:
                    # the file's decode timeline: dts = decode index - the source's reorder delay
                    packet.dts = decode_index - delay
                    if packet.dts > packet.pts:
                        raise _ReorderTooDeep
                    decode_index += 1
                packet.is_keyframe = encoded.is_keyframe
                mux(packet)

        def encode_kept(frames: list[av.VideoFrame]) -> None:
            nonlocal row, frame_index
            for frame in frames:
                if row < chosen.size and chosen[row] == frame_index:
                    picture = frame if frame.format.name == "yuv420p" else frame.reformat(format="yuv420p")
                    if transform is not None:
                        picture = transform(row, picture)
                    picture.pict_type = av.video.frame.PictureType.NONE
                    picture.pts, picture.time_base = row, time_base
                    mux_encoded(encoder.encode(picture))
                    row += 1
                frame_index += 1

        gop = -1
        try:
            for index, packet in enumerate(_video_packets(source, stream, camera_path)):
                if gop + 1 < layout.gop_starts.size and index == layout.gop_starts[gop + 1]:
                    gop += 1
                    frame_index = index
                    decode_index = index
                    if cut_gops[gop]:
                        encoder = _cut_encoder(layout, stream, fps, preset)
                if whole[gop] and ranks is not None:  # every frame stays: row == frame index
                    packet.pts, packet.dts = int(ranks[index]), index - delay
                    mux(packet)
                    row += 1
                elif whole[gop]:
                    packet.pts = packet.dts = row
                    mux(packet)
                    row += 1
                elif cut_gops[gop]:
                    encode_kept(decoder.decode(packet))
                    if index == gop_ends[gop] - 1:
                        encode_kept(decoder.decode(None))
                        decoder.flush_buffers()
                        mux_encoded(encoder.encode(None))
        except av.FFmpegError as exc:
            raise SourceError(f"video stream does not decode ({exc})", path=str(camera_path)) from exc
        except _ReorderTooDeep:
            return None  # the re-encoded GOP reorders deeper than the copied ones allow; nothing useful kept
    if row != chosen.size:
        raise SourceError(f"video stream yielded {row} of {chosen.size} needed frames", path=str(camera_path))
    return CutResult(
        gops_copied=int(np.count_nonzero(whole)),
        gops_reencoded=int(np.count_nonzero(cut_gops)),
        frames_reencoded=int(kept[cut_gops].sum()),
    )


def _encode_chosen_frames(
    camera_path: Path,
    chosen: np.ndarray,
    fps: int,
    out_path: Path,
    transform: FrameTransform | None = None,
    preset: str = X264_PRESET,
) -> None:
    """Encode decoded frame chosen[r] as output frame r, decoding the camera once, front to back
    (`transform`, when given, makes the picture each row gets from the decoded one)."""
    display_pts = _display_pts(camera_path)
    if chosen[-1] >= display_pts.size:
        raise SourceError(
            f"video stream has {display_pts.size} frames, fewer than probed (frame {int(chosen[-1])} needed)",
            path=str(camera_path),
        )
    chosen_pts = display_pts[chosen]
    with _open_media(camera_path) as source, _open_output(out_path) as output:
        stream = _video_stream(source, camera_path)
        stream.thread_type = "AUTO"
        encoder = None
        row = 0
        decoded = 0
        try:
            for frame in source.decode(stream):
                decoded += 1
                # Frames are identified by presentation time, so one the decoder shows although the
                # edit list discards it cannot shift the count.
                frame_pts = frame.pts
                if frame_pts != chosen_pts[row]:
                    continue
                if encoder is None:
                    encoder = _add_h264_stream(output, frame.width, frame.height, fps, preset)
                picture = _even_yuv420p(frame, encoder.width, encoder.height)
                picture.time_base = encoder.codec_context.time_base
                while row < chosen.size and chosen_pts[row] == frame_pts:
                    out = picture if transform is None else transform(row, picture)
                    out.time_base = encoder.codec_context.time_base
                    out.pts = row
                    output.mux(encoder.encode(out))
                    row += 1
                if row == chosen.size:
                    break
        except av.FFmpegError as exc:
            raise SourceError(f"video stream does not decode ({exc})", path=str(camera_path)) from exc
        if row < chosen.size:
            raise SourceError(
                f"video stream decoded to {decoded} frames without frame {int(chosen[row])} "
                f"of the {display_pts.size} its packets promise",
                path=str(camera_path),
            )
        output.mux(encoder.encode(None))


def _add_h264_stream(
    output: av.container.OutputContainer, width: int, height: int, fps: int, preset: str = X264_PRESET
) -> av.video.stream.VideoStream:
    encoder = output.add_stream(
        "libx264",
        rate=fps,
        options={"preset": preset, "crf": X264_CRF, "g": str(fps), "bf": "2", "x264-params": X264_REPEATABLE},
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


def redact_video(
    mp4_path: Path,
    fps: int,
    out_path: Path,
    frames: np.ndarray,
    fill: FrameTransform,
    progress: Callable[[int, int], None] | None = None,
) -> RedactedVideo:
    """Write `mp4_path` (an episode video, frame r at r/fps) to `out_path` with `fill` applied to the
    frames listed in `frames` (sorted, unique display indices): a smart cut that re-encodes just the GOPs
    holding such a frame (`fill` sees each of their frames and changes the listed ones) and copies the
    others packet for packet; when the video does not allow a safe cut, every frame is re-encoded with
    the range-aware encoder instead. Either encoder uses REDACT_X264_PRESET. Same frame count and timing
    either way. `progress(frame, frames)`, when given, is called with the position in the video of each
    re-encoded frame (in this thread, so that the caller can write it down; copied GOPs take no time)."""
    display_pts = _display_pts(mp4_path)
    count = int(display_pts.size)
    frames = np.asarray(frames, dtype=np.int64)
    if frames.size and (frames[0] < 0 or frames[-1] >= count or np.any(np.diff(frames) <= 0)):
        raise ValueError("frames must be sorted, unique display indices of the video")
    with _open_media(mp4_path) as source:
        stream = _video_stream(source, mp4_path)
        gops = sum(1 for p in _video_packets(source, stream, mp4_path) if p.is_keyframe)
    chosen = np.arange(count, dtype=np.int64)
    touched = set(frames.tolist())

    def transform(row: int, picture: av.VideoFrame) -> av.VideoFrame:
        if progress is not None:
            progress(row + 1, count)
        return fill(row, picture) if row in touched else picture

    with _staged(out_path) as staging:
        cut = _smart_cut(
            mp4_path, chosen, fps, staging, touched=frames, transform=transform, preset=REDACT_X264_PRESET
        )
        if cut is not None:
            return RedactedVideo("smart-cut", count, gops, cut.gops_copied, cut.gops_reencoded, cut.frames_reencoded)
        _encode_chosen_frames(mp4_path, chosen, fps, staging, transform, REDACT_X264_PRESET)
    return RedactedVideo("re-encode", count, gops, 0, gops, count)


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


def stats_sample_indices(count: int) -> np.ndarray:
    """Evenly spaced indices into `count` items, first and last included, at most STATS_MAX_FRAMES."""
    return np.unique(np.round(np.linspace(0, count - 1, min(count, STATS_MAX_FRAMES))).astype(np.int64))


def _downsample(rgb: np.ndarray) -> np.ndarray:
    """LeRobot's rule (auto_downsample_height_width): stride so the longer side is about 150 px."""
    height, width = rgb.shape[:2]
    if max(height, width) < STATS_DOWNSAMPLE_THRESHOLD:
        return rgb
    step = max(height, width) // STATS_TARGET_SIDE
    return rgb[::step, ::step].copy()  # a copy, so the full-size frame is freed


def _sampled_frames(mp4_path: Path) -> list[np.ndarray]:
    """The statistics sample, downsampled RGB: evenly spread keyframes, or evenly spread frames when
    the video has few keyframes (docs/video.md states the rule)."""
    indexed = _indexed_keyframes(mp4_path)
    if indexed is not None:
        return indexed
    with _open_media(mp4_path) as container:
        stream = _video_stream(container, mp4_path)
        packets = [(p.pts, p.is_keyframe) for p in _video_packets(container, stream, mp4_path)]
    keyframe_pts = np.sort(np.array([pts for pts, key in packets if key], dtype=np.int64))
    if keyframe_pts.size >= STATS_MIN_KEYFRAMES:
        return _decoded_frames(mp4_path, keyframe_pts[stats_sample_indices(keyframe_pts.size)], keyframes_only=True)
    display_pts = np.sort(np.array([pts for pts, _ in packets], dtype=np.int64))
    return _decoded_frames(mp4_path, display_pts[stats_sample_indices(display_pts.size)], keyframes_only=False)


def _indexed_keyframes(mp4_path: Path) -> list[np.ndarray] | None:
    """The sampled keyframes found through the container's index, each read by a seek: no pass over
    every packet. None when the index cannot be used (no index, fewer than STATS_MIN_KEYFRAMES
    keyframes, or a packet found where the index does not promise it); the caller then reads every
    packet, which gives the same frames."""
    with _open_media(mp4_path) as container:
        stream = _video_stream(container, mp4_path)
        keyframes = [e.timestamp for e in stream.index_entries if e.is_keyframe and not e.is_discard]
        if len(keyframes) < STATS_MIN_KEYFRAMES:
            return None
        stream.thread_type = "AUTO"
        stream.codec_context.skip_frame = "NONKEY"
        frames: list[np.ndarray] = []
        shown = []
        try:
            for timestamp in np.array(keyframes, dtype=np.int64)[stats_sample_indices(len(keyframes))].tolist():
                # the seek lands on a keyframe at or before the one wanted (it compares display times);
                # the packets up to the wanted one, at most a group of pictures, are skipped undecoded
                container.seek(timestamp, stream=stream, backward=True, any_frame=False)
                wanted = (p for p in _data_packets(container, stream, mp4_path) if (p.dts or 0) >= timestamp)
                packet = next(wanted, None)
                if packet is None or packet.dts != timestamp or not packet.is_keyframe or packet.is_discard:
                    return None
                decoded = [*stream.decode(packet), *stream.decode(None)]
                stream.codec_context.flush_buffers()
                if len(decoded) != 1 or decoded[0].pts != packet.pts:
                    return None
                shown.append(packet.pts)
                frames.append(_downsample(decoded[0].to_ndarray(format="rgb24")))
        except av.FFmpegError as exc:
            raise SourceError(f"video stream does not decode ({exc})", path=str(mp4_path)) from exc
    if shown != sorted(shown):  # keyframes in decode order must be in display order, as the rule assumes
        return None
    return frames


def _decoded_frames(mp4_path: Path, targets: np.ndarray, *, keyframes_only: bool) -> list[np.ndarray]:
    """The frames presented at `targets` (pts), downsampled RGB, in one pass over the file. With
    `keyframes_only` just the target packets reach the decoder, which decodes key frames only."""
    wanted = set(targets.tolist())
    frames: list[np.ndarray] = []
    with _open_media(mp4_path) as container:
        stream = _video_stream(container, mp4_path)
        stream.thread_type = "AUTO"
        if keyframes_only:
            stream.codec_context.skip_frame = "NONKEY"

        def keep(decoded: list[av.VideoFrame]) -> None:
            frames.extend(_downsample(f.to_ndarray(format="rgb24")) for f in decoded if f.pts in wanted)

        try:
            for packet in _data_packets(container, stream, mp4_path):
                if not keyframes_only or packet.pts in wanted:
                    keep(stream.decode(packet))
            keep(stream.decode(None))
        except av.FFmpegError as exc:
            raise SourceError(f"video stream does not decode ({exc})", path=str(mp4_path)) from exc
    return frames


def video_stats(mp4_path: Path) -> dict[str, list]:
    """Per-channel RGB statistics in [0, 1] over a sample of decoded frames, each shaped (3, 1, 1)."""
    frames = _sampled_frames(mp4_path)
    if not frames:
        raise SourceError("video has no frames to sample", path=str(mp4_path))
    return image_stats(frames)
