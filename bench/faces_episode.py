"""Face detection and redaction of one generated 720p episode, timed (prints figures; not a test).

    .venv/bin/python bench/faces_episode.py [--seconds 20] [--work DIR] [--detect-only]

Generates an aligned 30 Hz 1280x720 capture whose camera shows a bystander's face over the middle half of the
recording (exporter.generate.generate_capture with ``bystander=True``, as ``python -m exporter generate
--bystander`` makes it) and exports it as an episode shard, both reused from ``--work`` when an earlier run
left them there. Generating and exporting run in a child process, so that this process's peak RSS is that of
what is timed. The detector's weights are loaded once before the timing starts (a worker keeps its session).
Then, as the portal's jobs do, with the detector's defaults:

- ``detect_video`` on the shard's video: wall time, frames per second, the ratio to real time at the video's
  own frame rate, the CPU time it took (every thread of this process: decoding, the network's workers), the
  process's peak RSS after it; and how many of the frames that show the face have a box
  covering it (generate.bystander_box; a box grown by the redaction's margin covering 90 % of the face, as
  bench/faces.py counts), and how many boxes fall on frames without the face;
- unless ``--detect-only``, ``redact_shard`` filling every detected box into a derived shard: wall time, the
  ratio to real time, its CPU time, the GOPs re-encoded, the peak RSS after it; and the two together;
- then (not timed; ``--no-pixels`` skips it) both videos decoded side by side (changed_outside): the share of
  pixels outside the filled rectangles (redact.fill_rect of every box) that differ from the original's, in
  the GOPs without a box (copied: must be 0) and in those with one (re-encoded: x264's loss, with the luma's
  PSNR there), and inside the rectangles how far the decoded luma strays from the fill's (x264's loss). A pixel
  outside differs when its luma or its chroma sample (4:2:0, shared by 2x2 pixels) does.

The wall times move with the machine's load; the CPU times much less: CPU seconds per second of video below
the number of cores is what an otherwise idle machine needs to keep up with real time.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import av
import numpy as np

from exporter.faces import detector
from exporter.faces.testset import covers
from exporter.generate import bystander_box, generate_capture
from exporter.redact import FILL_YUV, fill_rect, redact_shard
from exporter.shard import export_shard

WIDTH, HEIGHT = 1280, 720
FILL_TOLERANCE = 8  # luma levels a re-encoded fill may stray from the fill's value (x264's loss at its edges)


def prepare(capture: Path, shards: Path, seconds: float) -> None:
    """The capture with a bystander and its exported shard (each made only when missing)."""
    if not capture.exists():
        generate_capture(capture, seconds=seconds, retries=0, width=WIDTH, height=HEIGHT, bystander=True)
    if not (shards / "episode-000000").exists():
        export_shard(capture, shards)


def _planes(frame: av.VideoFrame) -> tuple:
    """Luma and the two half-resolution chroma planes of a 4:2:0 frame, as arrays."""
    data = frame.to_ndarray(format="yuv420p")
    height, width = frame.height, frame.width
    return data[:height], data[height:].reshape(2, height // 2, width // 2)


def changed_outside(original: Path, redacted: Path, by_frame: dict) -> dict:
    """Decode both videos frame by frame and count, outside the filled rectangles, the pixels whose luma or
    chroma differs from the original's: in GOPs without a box (copied) and with one (re-encoded), with the
    luma's PSNR outside the rectangles there; and inside the rectangles the pixels that are not the fill.
    GOPs start at the original's keyframes."""
    counts = {"copied": [0, 0], "reencoded": [0, 0]}  # [changed, compared] pixels outside the rectangles
    squared, compared = 0.0, 0  # luma outside the rectangles of re-encoded GOPs
    not_filled = filled = worst = 0  # inside the rectangles: luma further than FILL_TOLERANCE from the fill's
    gop: list[tuple] = []  # the current GOP's (original, redacted, rects) planes

    def close_gop() -> None:
        nonlocal squared, compared, not_filled, filled, worst
        kind = "reencoded" if any(rects for _o, _r, rects in gop) else "copied"
        for (luma, chroma), (luma2, chroma2), rects in gop:
            height, width = luma.shape
            outside = np.ones((height, width), bool)
            for x0, y0, x1, y1 in rects:
                outside[y0:y1, x0:x1] = False
            if rects:
                off = np.abs(luma2[~outside].astype(np.int16) - FILL_YUV[0])
                worst = max(worst, int(off.max()))
                not_filled += int((off > FILL_TOLERANCE).sum())
                filled += off.size
            counts[kind][1] += int(outside.sum())
            if np.array_equal(luma, luma2) and np.array_equal(chroma, chroma2):
                if kind == "reencoded":
                    compared += int(outside.sum())
                continue  # nothing differs: the usual case of a copied GOP
            differs = luma != luma2
            differs |= np.repeat(np.repeat((chroma != chroma2).any(axis=0), 2, 0), 2, 1)
            counts[kind][0] += int((differs & outside).sum())
            if kind == "reencoded":
                error = luma[outside].astype(np.int32) - luma2[outside].astype(np.int32)
                squared += float(np.dot(error, error))
                compared += error.size
        gop.clear()

    with av.open(str(original)) as first, av.open(str(redacted)) as second:
        for index, (a, b) in enumerate(zip(first.decode(video=0), second.decode(video=0), strict=True)):
            if a.key_frame and gop:
                close_gop()
            rects = [fill_rect(box, a.width, a.height) for box in by_frame.get(index, [])]
            gop.append((_planes(a), _planes(b), rects))
        if gop:
            close_gop()
    mse = squared / compared if compared else 0.0
    return {
        "copied": counts["copied"], "reencoded": counts["reencoded"],
        "psnr": float("inf") if mse == 0 else 10 * math.log10(255**2 / mse),
        "not_filled": not_filled, "filled": filled, "worst": worst,
    }


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--work", type=Path, help="folder kept between runs (default: a temporary one)")
    parser.add_argument("--detect-only", action="store_true", help="time the detection alone")
    parser.add_argument("--no-pixels", action="store_true",
                        help="do not compare the redacted video's pixels with the original's")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-faces-episode-"))
    work.mkdir(parents=True, exist_ok=True)
    name = f"{args.seconds:g}s-{WIDTH}x{HEIGHT}-bystander"
    capture, shards = work / f"capture-{name}", work / f"shards-{name}"
    start = time.perf_counter()
    child = multiprocessing.get_context("spawn").Process(target=prepare, args=(capture, shards, args.seconds))
    child.start()
    child.join()
    if child.exitcode != 0:
        sys.exit(f"faces_episode: generating or exporting the episode failed (exit code {child.exitcode})")
    ready = time.perf_counter() - start
    print(f"episode {name}: ready in {ready:.1f} s (generated and exported, or reused, in a child process)")
    shard = shards / "episode-000000"
    videos = sorted(shard.rglob("*.mp4"))
    if len(videos) != 1:
        sys.exit(f"faces_episode: expected one MP4 in {shard}, found {len(videos)}")
    with av.open(str(videos[0])) as container:
        rate = float(container.streams.video[0].average_rate)
    print(f"detector {detector.detector_id()}: input width {detector.DEFAULT_INPUT_WIDTH}, "
          f"stride {detector.DEFAULT_STRIDE}, threshold {detector.DEFAULT_THRESHOLD}, "
          f"run peak {detector.DEFAULT_MIN_PEAK}, "
          f"{detector.VIDEO_WORKERS} network runs at once, {detector.VIDEO_INTRA_OP_THREADS} onnxruntime thread each")
    start = time.perf_counter()
    detector.video_sessions()  # a worker loads and checks the weights once; not part of an episode's time
    print(f"weights read, checked and the session built in {time.perf_counter() - start:.2f} s (not counted below)")
    print(f"load before: {os.getloadavg()}")

    start, cpu_start = time.perf_counter(), cpu_s()
    found = detector.detect_video(videos[0])
    detect_s, detect_cpu = time.perf_counter() - start, cpu_s() - cpu_start
    frames = found.frame_count
    duration = frames / rate
    print(f"detect_video: {frames} frames of {found.width}x{found.height} at {rate:g} fps ({duration:.1f} s) "
          f"in {detect_s:.2f} s = {frames / detect_s:.1f} fps = {duration / detect_s:.2f}x real time; "
          f"CPU {detect_cpu:.2f} s = {detect_cpu / duration:.2f} CPU s per s of video; peak RSS {peak_mb():.0f} MB")
    by_frame = found.by_frame()
    shown = covered = stray = 0
    for index in range(frames):
        truth = bystander_box(index, found.width, found.height, frames)
        boxes = by_frame.get(index, [])
        if truth is None:
            stray += len(boxes)
            continue
        shown += 1
        covered += any(covers(box, truth) for box in boxes)
    print(f"  {len(found.frames)} boxes on {len(by_frame)} frames; the face shows on {shown} frames, covered on "
          f"{covered} ({covered / max(1, shown):.1%}); boxes on frames without the face: {stray}")

    if not args.detect_only:
        dest = work / f"redacted-{name}"
        shutil.rmtree(dest, ignore_errors=True)
        start, cpu_start = time.perf_counter(), cpu_s()
        result = redact_shard(shard, dest, by_frame, record={"bench": "faces_episode"})
        redact_s, redact_cpu = time.perf_counter() - start, cpu_s() - cpu_start
        print(f"redact_shard: {result.method}, {result.gops_reencoded} of {result.gops} GOPs re-encoded "
              f"({result.frames_reencoded} frames), {result.gops_copied} copied, in {redact_s:.2f} s = "
              f"{duration / redact_s:.2f}x real time; CPU {redact_cpu:.2f} s; peak RSS {peak_mb():.0f} MB")
        total, total_cpu = detect_s + redact_s, detect_cpu + redact_cpu
        print(f"detection + redaction: {total:.2f} s for {duration:.1f} s of video = "
              f"{duration / total:.2f}x real time; CPU {total_cpu:.2f} s = "
              f"{total_cpu / duration:.2f} CPU s per s of video ({os.cpu_count()} cores)")
        if not args.no_pixels:
            start = time.perf_counter()
            redacted_videos = sorted(dest.rglob("*.mp4"))
            pixels = changed_outside(videos[0], redacted_videos[0], by_frame)
            (copied, copied_of), (changed, changed_of) = pixels["copied"], pixels["reencoded"]
            print(f"pixels outside the filled rectangles that differ from the original's: in GOPs without a box "
                  f"(copied) {copied} of {copied_of} ({copied / max(1, copied_of):.3%}); in GOPs with one "
                  f"(re-encoded) {changed} of {changed_of} ({changed / max(1, changed_of):.3%}), luma PSNR there "
                  f"{pixels['psnr']:.1f} dB; inside the rectangles, luma more than {FILL_TOLERANCE} levels from the "
                  f"fill's on {pixels['not_filled']} of {pixels['filled']} pixels, at most {pixels['worst']} "
                  f"(compared in {time.perf_counter() - start:.1f} s, not counted above)")
    print(f"load after: {os.getloadavg()}")
    if args.work is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
