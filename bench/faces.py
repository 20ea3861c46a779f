"""Face detector benchmark: recall by face size, false boxes in face-free video, detector speed (prints figures).

    .venv/bin/python bench/faces.py [--clips 24] [--length 16] [--free-minutes 2] [--free 0]
                                    [--widths 480 640] [--strides 1 2 3 4 6] [--threshold T] [--min-peak P]
                                    [--min-verified V] [--sure-verified S] [--hold H]
                                    [--fps-frames 90]

--threshold, --min-peak, --min-verified, --sure-verified and --hold default to the detector's own
(detector.DEFAULT_THRESHOLD, DEFAULT_MIN_PEAK, DEFAULT_MIN_VERIFIED, DEFAULT_SURE_VERIFIED, DEFAULT_HOLD); --min-peak
0 keeps every run, as the detector did before the run filter; --min-verified 0 verifies nothing, as the detector
did before the verification stage; --hold 0 does not hold runs, as the detector did before 2026-12-03's second
change.

The test set is generated in memory (exporter/faces/testset.py): faces from photographs bundled with
scikit-image pasted into 1280x720 egocentric frames at sizes 24-300 px, turned, blurred, brightened or
darkened, moving and partly covered by a hand. False alarms are counted on a long face-free video
(testset.free_video, ``--free-minutes`` at 30 fps: scenes of 3-8 s, each a panning wall of bundled textures
and photographs with a moving hand, made frame by frame so that memory stays flat), plus ``--free`` short
face-free clips of ``--length`` frames if asked for.

For each network input width the detector runs once on every frame of the face clips, and on the frames of
the face-free video that some asked stride analyses; each stride k is then played back as
exporter.faces.detector.detect_video plays it (detector.replay_stride: the network on frames 0, k, 2k, ...
and the last; boxes carried between them by detector.fill_between; runs of boxes whose best score stays below
``--min-peak`` (unless verified at --sure-verified) dropped by detector.strong_runs, and with --min-verified the
boxes of each analysed frame verified by detector.verify_image and runs whose best verification score stays below
it dropped too; the runs kept held for --hold frames each side by detector.hold_runs). A face counts as
found in a frame when a detected box, grown by a quarter of its size each side as the redaction grows it, covers
90 % of the face's box.

Prints, per width and stride: recall by size band (24-40, 40-80, 80-160, 160-300 px) over every frame with the
face inside the picture, hidden by the hand or not; recall of faces 40 px or taller over every such frame, over
the frames where the hand leaves at least a quarter of the face's pixels in view (testset.Clip.visible; the figure
the goal counts: under a quarter is slivers between fingers, nothing to recognise, docs/privacy.md) and over those
where it leaves at least half (the gaps between the three are what covered faces cost); false boxes per minute of
face-free video, with the minutes
it was measured over (boxes on frames, and runs of consecutive frames counted once); and the network's frames
per second times the stride. Then detect_video's frames per second (decode, scaling, network, verification,
carrying) and the CPU time it took per second of video (the process's, all threads) on an encoded 720p clip
written to a temporary folder that is removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


import av
import numpy as np

from exporter.faces import detector
from exporter.faces import testset as ts

FPS = 30


def analyse(frame, width: int | None, threshold: float, verify: bool) -> tuple:
    """What detect_video does on an analysed frame: the network's boxes and, when runs are verified, their
    (raw, verification) score pairs (detector.verify_image on the full-resolution frame)."""
    boxes, scores = detector.detect_image(frame, threshold=threshold, input_width=width)
    if not verify:
        return boxes, scores
    return boxes, np.stack([scores, detector.verify_image(frame, boxes, scores)], axis=1)


def per_frame(clip: ts.Clip, width: int | None, threshold: float, verify: bool) -> tuple[list, float]:
    """The network on every frame of a clip: [(boxes, scores)] and the seconds spent in detection."""
    out, spent = [], 0.0
    for frame in clip.frames():
        start = time.perf_counter()
        out.append(analyse(frame, width, threshold, verify))
        spent += time.perf_counter() - start
    return out, spent


def free_video_results(
    video: ts.FreeVideo, width: int | None, threshold: float, strides: list[int], verify: bool
) -> tuple[list, float, int]:
    """The network on the frames of the face-free video that one of the strides analyses (None for the others,
    which replay_stride fills), the seconds spent in detection and the frames run."""
    last = video.length - 1
    out, spent, run = [], 0.0, 0
    for index, frame in enumerate(video.frames()):
        if index == last or any(index % k == 0 for k in strides):
            start = time.perf_counter()
            out.append(analyse(frame, width, threshold, verify))
            spent += time.perf_counter() - start
            run += 1
        else:
            out.append(None)
    return out, spent, run


def false_runs(frames: list) -> tuple[int, int]:
    """Boxes over all frames, and runs of consecutive frames with a box (a lingering false box counts once)."""
    boxes = sum(len(b) for b, _ in frames)
    runs, previous = 0, False
    for b, _ in frames:
        present = len(b) > 0
        runs += present and not previous
        previous = present
    return boxes, runs


def encode(path: Path, clip: ts.Clip) -> None:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=FPS, options={"preset": "veryfast", "crf": "20"})
        stream.width, stream.height, stream.pix_fmt = clip.width, clip.height, "yuv420p"
        for image in clip.frames():
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=24, help="clips with a face (spread over the size bands)")
    parser.add_argument("--length", type=int, default=16, help="frames per clip")
    parser.add_argument("--free-minutes", type=float, default=2.0,
                        help="minutes of the long face-free video at 30 fps (0: none)")
    parser.add_argument("--free", type=int, default=0, help="short face-free clips of --length frames, added")
    parser.add_argument("--widths", type=int, nargs="+", default=[480, 640], help="network input widths")
    parser.add_argument("--strides", type=int, nargs="+", default=[1, 2, 3, 4, 6])
    parser.add_argument("--threshold", type=float, default=detector.DEFAULT_THRESHOLD)
    parser.add_argument("--min-peak", type=float, default=detector.DEFAULT_MIN_PEAK,
                        help="best score a run of boxes must reach to be kept (0: keep every run)")
    parser.add_argument("--min-verified", type=float, default=detector.DEFAULT_MIN_VERIFIED,
                        help="best verification score a run of boxes must reach to be kept (0: no verification)")
    parser.add_argument("--sure-verified", type=float, default=detector.DEFAULT_SURE_VERIFIED,
                        help="verification score above which a run is kept whatever its best network score")
    parser.add_argument("--hold", type=int, default=detector.DEFAULT_HOLD,
                        help="frames a kept run is held for before and after it (0: not held)")
    parser.add_argument("--fps-frames", type=int, default=90, help="frames of the encoded 720p clip timed")
    parser.add_argument("--seed", type=int, default=2400)
    args = parser.parse_args()
    verify = args.min_verified > 0
    kept = {"hold": args.hold, "sure_verified": args.sure_verified}  # how runs are kept and held (replay_stride)

    bands = ts.SIZE_BANDS
    face_clips = [
        ts.make_clip(args.seed + i, length=args.length, band=bands[i % len(bands)]) for i in range(args.clips)
    ]
    free_clips = [ts.make_clip(args.seed + 10_000 + i, length=args.length) for i in range(args.free)]
    free_video = ts.free_video(args.seed + 30_000, args.free_minutes, fps=FPS) if args.free_minutes > 0 else None
    width, height = face_clips[0].width, face_clips[0].height
    free_minutes = len(free_clips) * args.length / FPS / 60 + (free_video.minutes if free_video else 0.0)
    if free_minutes <= 0:
        parser.error("no face-free video: give --free-minutes or --free")
    print(
        f"detector {detector.detector_id()}; measured with threshold {args.threshold}, run peak {args.min_peak} "
        f"(unless verified at {args.sure_verified}), hold {args.hold}, "
        f"verification floor {args.min_verified} on {width}x{height}"
    )
    print(f"{len(face_clips)} face clips of {args.length} frames")
    print(
        f"face-free: {free_video.minutes if free_video else 0:.2f} min video "
        f"({len(free_video.scenes) if free_video else 0} scenes) + {len(free_clips)} clips of {args.length} frames "
        f"= {free_minutes:.2f} min at {FPS} fps"
    )
    print(f"load {os.getloadavg()}")
    bands_head = " | ".join(f"{lo}-{hi}px" for lo, hi in bands)
    header = (
        f"width stride | {bands_head} | >=40px all frames | >=40px in view>=1/4 | >=40px in view>=1/2 | "
        f"false/min over {free_minutes:.2f} min (runs/min) | net fps x stride"
    )
    print(header)
    for net_width in args.widths:
        face_results, free_results, spent, frames_run = [], [], 0.0, 0
        for clip in face_clips:
            results, seconds = per_frame(clip, net_width, args.threshold, verify)
            face_results.append(results)
            spent, frames_run = spent + seconds, frames_run + len(results)
        for clip in free_clips:
            results, seconds = per_frame(clip, net_width, args.threshold, verify)
            free_results.append(results)
            spent, frames_run = spent + seconds, frames_run + len(results)
        if free_video is not None:
            results, seconds, run = free_video_results(free_video, net_width, args.threshold, args.strides, verify)
            free_results.append(results)
            spent, frames_run = spent + seconds, frames_run + run
        net_fps = frames_run / spent
        for stride in args.strides:
            found = {band: [0, 0] for band in bands}
            # faces >= 40 px on frames where the hand leaves at least a quarter, and at least half, of the face in
            # view (testset.Clip.visible: its pixels, not its box)
            quarter, half = [0, 0], [0, 0]
            for clip, results in zip(face_clips, face_results, strict=True):
                band = ts.band_of(clip.size)
                played = detector.replay_stride(
                    results, stride, width, height, args.min_peak, args.min_verified, **kept
                )
                for truth, in_view, (boxes, _s) in zip(clip.truth, clip.visible, played, strict=True):
                    if truth is None:
                        continue
                    hit = any(ts.covers(tuple(b), truth) for b in boxes.tolist())
                    found[band][1] += 1
                    found[band][0] += hit
                    for share, tally in ((0.25, quarter), (0.5, half)):
                        if band[0] >= 40 and in_view >= share:
                            tally[1] += 1
                            tally[0] += hit
            false_boxes = false_count = 0
            for results in free_results:
                boxes, runs = false_runs(
                    detector.replay_stride(results, stride, width, height, args.min_peak, args.min_verified, **kept)
                )
                false_boxes, false_count = false_boxes + boxes, false_count + runs
            big = [found[b] for b in bands if b[0] >= 40]
            big_found, big_total = sum(f for f, _ in big), sum(t for _, t in big)
            cells = " | ".join(f"{f / t:6.1%} ({f}/{t})" if t else "   n/a" for f, t in found.values())
            big_cell = f"{big_found / max(1, big_total):6.1%} ({big_found}/{big_total})"
            quarter_cell, half_cell = (f"{f / max(1, t):6.1%} ({f}/{t})" for f, t in (quarter, half))
            print(
                f"{net_width:5d} {stride:6d} | {cells} | {big_cell} | {quarter_cell} | {half_cell} | "
                f"{false_boxes / free_minutes:7.1f} ({false_count / free_minutes:.1f}) | {net_fps * stride:6.1f}"
            )
    if args.fps_frames:
        clip = ts.make_clip(args.seed + 20_000, length=args.fps_frames, band=(40, 160))
        with tempfile.TemporaryDirectory(prefix="ceres-faces-bench-") as tmp:
            path = Path(tmp) / "clip.mp4"
            encode(path, clip)
            for net_width in args.widths:
                for stride in args.strides:
                    start, cpu = time.perf_counter(), time.process_time()
                    result = detector.detect_video(
                        path, threshold=args.threshold, stride=stride, input_width=net_width, min_peak=args.min_peak,
                        min_verified=args.min_verified, **kept,
                    )
                    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
                    video_seconds = result.frame_count / FPS
                    print(
                        f"detect_video width {net_width} stride {stride}: {result.frame_count} frames of "
                        f"{clip.width}x{clip.height} in {seconds:.2f} s = {result.frame_count / seconds:.1f} fps "
                        f"({result.frame_count / seconds / FPS:.2f}x real time at {FPS} fps), "
                        f"CPU {cpu / video_seconds:.2f} s per second of video"
                    )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
