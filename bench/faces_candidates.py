"""Face detector candidates: where the misses are, and what other input widths, strides, two-scale schemes,
thresholds and a track-level false-alarm filter would do (prints figures; changes nothing).

    .venv/bin/python bench/faces_candidates.py [--seed 2400] [--clips 24] [--free 48] [--length 16]
                                               [--free-length 16] [--widths 640 960 1280] [--wide-every 4]
                                               [--cache FILE] [--fps-frames 96] [--fps-rounds 2]
                                               [--free-minutes M] [--every N] [--long-every N]
                                               [--verify BOX/SIDE ...] [--candidate 0.1] [--table all|verify]

The test set is bench/faces.py's (exporter/faces/testset.py, same seeds by default): face clips spread over the
size bands and face-free clips; another --seed gives another set to check a choice on. The network runs once on
every frame at 640 px (on every --wide-every-th frame and the last at wider inputs, which is what strides and
extra scales that are multiples of it need), keeping every box scoring 0.05 or more (filtering those by a higher
threshold afterwards gives what the network gives at that threshold: a box is only ever suppressed by a
higher-scoring one). Each scheme is then played back from those results as
exporter.faces.detector.detect_video plays a stride: the network's boxes on the analysed frames, boxes carried
by detector.fill_between on the frames between, weak runs dropped by detector.strong_runs. ``--cache`` keeps
the per-frame results in a pickle (made for one set of arguments: use it again only with the same ones) so
that the schemes can be replayed without running the network again.

The verification stage (``--verify 96/256 ...``): every box scoring ``--candidate`` or more on a frame the network
ran on is looked at again by detector.verify_boxes on a SIDE px crop of the frame where the box is BOX px tall
(every such box: detect_video verifies the detector.VERIFY_MAX best of a frame, more than these frames hold on
average); the results go into the cache too. Schemes "verifyBOX/SIDE>=v" keep a run only when its best
verification score reaches v. ``--free-minutes`` adds bench/faces.py's long face-free video (same seed), on which
the network runs on every ``--long-every``-th frame only; ``--every`` does the same for the 640 px input everywhere
(the causes of misses, which need every frame, are then not printed).

Printed:
  1. where the misses are (640 px input, every frame and the current stride): recall of faces >= 40 px by
     hand cover, rotation, blur, brightness, face source and size band, and the best score that the network
     gave a box covering a missed face (is the face seen at all, below the threshold?);
  2. per scheme: recall by size band, recall of faces >= 40 px, false boxes per minute of face-free video (and
     runs of consecutive frames counted once), and the network cost per frame relative to 640 px on every
     frame, with the frames per second that cost predicts from the measured network and decoding times;
  2b. with --verify, per crop size: the best network and verification scores of the runs on a face and of the
     other runs (each scheme played without a filter), and the verification's cost;
  3. detect_video's frames per second on an encoded 720p clip: the settings before this measurement
     (640 px, stride 2, threshold 0.2, no run filter) and the detector's defaults, alternated.
"""

from __future__ import annotations

import argparse
import itertools
import os
import pickle
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import av
import numpy as np

from exporter.faces import detector
from exporter.faces import testset as ts

FPS = 30
FLOOR = 0.05  # the lowest score kept from the network; every threshold measured is above it
SEED = 2400  # bench/faces.py's default


@dataclass
class Params:
    source: str
    angle: float
    blur: float
    brightness: float


def build(args) -> tuple[list, list, dict]:
    """The clips, and the face parameters that make_clip drew for each (recorded as it calls face_patch)."""
    drawn: list[Params] = []
    original = ts.face_patch

    def recording(source, size, angle, blur, brightness):
        drawn.append(Params(source.name, angle, blur, brightness))
        return original(source, size, angle, blur, brightness)

    ts.face_patch = recording
    try:
        bands = ts.SIZE_BANDS
        face = [ts.make_clip(args.seed + i, length=args.length, band=bands[i % len(bands)]) for i in range(args.clips)]
    finally:
        ts.face_patch = original
    free = [ts.make_clip(args.seed + 10_000 + i, length=args.free_length) for i in range(args.free)]
    return face, free, {clip.seed: params for clip, params in zip(face, drawn, strict=True)}


def run_network(clips, width: int, every: int = 1, long_every: int = 1) -> tuple[list, float, int]:
    """Per clip, per frame: (boxes, scores) at the FLOOR threshold, on every ``every``-th frame and the last
    (None on the others; on the long face-free video every ``long_every``-th if that is more); the seconds
    spent in the network and the number of frames it ran on."""
    net, runs = 0.0, 0
    out = []
    net_w, net_h = detector.network_size(1280, 720, width)
    for clip in clips:
        results = []
        step = max(every, long_every) if isinstance(clip, ts.FreeVideo) else every
        for i, frame in enumerate(clip.frames()):
            if i % step and i != clip.length - 1:
                results.append(None)
                continue
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            small = video_frame.to_ndarray(width=net_w, height=net_h, format="rgb24")
            t1 = time.perf_counter()
            boxes, scores = detector.detect_rgb(small, FLOOR)
            net, runs = net + time.perf_counter() - t1, runs + 1
            results.append((detector._to_frame(boxes, net_w / clip.width, net_h / clip.height, 1280, 720), scores))
        out.append(results)
    return out, net, runs


def above(result, threshold: float):
    boxes, scores = result
    keep = scores >= threshold
    return boxes[keep], scores[keep]


def merge(results: list, iou: float = detector.NMS_IOU):
    """Boxes of several scales on one frame, merged by non-maximum suppression."""
    boxes = np.concatenate([b for b, _ in results]).reshape(-1, 4).astype(np.float32)
    scores = np.concatenate([s for _, s in results]).astype(np.float32)
    if len(boxes) == 0:
        return boxes, scores
    keep = detector.nms(boxes, scores, iou)
    return boxes[keep], scores[keep]


@dataclass(frozen=True)
class Scheme:
    """Analysed frames: every ``stride``-th at ``width`` (threshold ``threshold``), and if ``extra_width``,
    every ``extra_every``-th frame also at ``extra_width`` (threshold ``extra_threshold``), merged by NMS.
    ``strong``: drop a run of carried boxes whose best score never reaches it (0 = keep every run)."""

    width: int
    stride: int
    threshold: float = 0.2
    extra_width: int = 0
    extra_every: int = 0
    extra_threshold: float = 0.2
    strong: float = 0.0
    verify: tuple[int, int] | None = None  # (box px, crop side px) of the verification stage
    verified: float = 0.0  # drop a run whose best verification score never reaches it

    def label(self) -> str:
        text = f"{self.width}/s{self.stride}/t{self.threshold:g}"
        if self.extra_width:
            text += f" + {self.extra_width}/every{self.extra_every}/t{self.extra_threshold:g}"
        if self.strong:
            text += f" runs>={self.strong:g}"
        if self.verify:
            text += f" verify{self.verify[0]}/{self.verify[1]}>={self.verified:g}"
        return text

    def cost(self, unit: dict) -> float:
        """Network seconds per frame (``unit``: seconds per analysed frame at each width)."""
        value = unit[self.width] / self.stride
        if self.extra_width:
            value += unit[self.extra_width] / self.extra_every
        return value


def pixels(width: int) -> int:
    net_w, net_h = detector.network_size(1280, 720, width)
    return net_w * net_h


def with_verification(result, threshold: float, scores_v) -> tuple:
    """The boxes of a result above the threshold, their scores as (raw, verification) pairs."""
    boxes, scores = result
    keep = scores >= threshold
    return boxes[keep], np.stack([scores[keep], scores_v[keep]], axis=1).reshape(-1, 2).astype(np.float32)


def play(scheme: Scheme, per_width: dict, clip_index: int, n: int, width: int, height: int,
         verified: dict | None = None) -> list:
    """What detect_video would report for the scheme. With ``scheme.verify``, ``verified[(box, side, width)]``
    holds the verification score of each box (run_verify) and runs whose best one stays below
    ``scheme.verified`` are dropped."""
    if scheme.verify:
        return play_verified(scheme, per_width, clip_index, n, width, height, verified)
    main = per_width[scheme.width][clip_index]
    keys = set(range(0, n, scheme.stride)) | {n - 1}
    extra_keys = set()
    if scheme.extra_width:
        extra_keys = set(range(0, n, scheme.extra_every))
        keys |= extra_keys
    keyed = {}
    for k in sorted(keys):
        parts = []
        if k % scheme.stride == 0 or k == n - 1:
            parts.append(above(main[k], scheme.threshold))
        if k in extra_keys:
            parts.append(above(per_width[scheme.extra_width][clip_index][k], scheme.extra_threshold))
        keyed[k] = merge(parts) if len(parts) > 1 else parts[0]
    out = carried(keyed, n, width, height)
    if scheme.strong:
        out = drop_weak_runs(out, scheme.strong)
    return out


def carried(keyed: dict, n: int, width: int, height: int) -> list:
    """Per frame, the analysed frames' results in ``keyed`` and the boxes detector.fill_between carries to the
    frames between them."""
    out = [None] * n
    ordered = sorted(keyed)
    for k in ordered:
        out[k] = keyed[k]
    for a, b in itertools.pairwise(ordered):
        for offset, between in enumerate(detector.fill_between(keyed[a], keyed[b], b - a, width, height), start=1):
            out[a + offset] = between
    return out


def carried_flat(keyed: dict, n: int, width: int, height: int) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """The analysed frames' (boxes, (raw, verification) scores) in ``keyed`` with the boxes carried to the frames
    between (carried), per frame and as flat arrays (frame index, boxes, score pairs)."""
    out = carried(keyed, n, width, height)
    index = np.concatenate([np.full(len(b), i, np.int32) for i, (b, _s) in enumerate(out)]).astype(np.int32)
    boxes = np.concatenate([b.reshape(-1, 4) for b, _s in out]).astype(np.float32)
    scores = np.concatenate([sc.reshape(-1, 2) for _b, sc in out]).astype(np.float32)
    return out, index, boxes, scores


def play_verified(scheme: Scheme, per_width: dict, clip_index: int, n: int, width: int, height: int,
                  verified: dict) -> list:
    box_px, side = scheme.verify
    keys = set(range(0, n, scheme.stride)) | {n - 1}
    extra_keys = set(range(0, n, scheme.extra_every)) if scheme.extra_width else set()
    keyed = {}
    for k in sorted(keys | extra_keys):
        parts = []
        if k in keys:
            v = verified[(box_px, side, scheme.width)][clip_index][k]
            parts.append(with_verification(per_width[scheme.width][clip_index][k], scheme.threshold, v))
        if k in extra_keys:
            v = verified[(box_px, side, scheme.extra_width)][clip_index][k]
            parts.append(with_verification(per_width[scheme.extra_width][clip_index][k], scheme.extra_threshold, v))
        if len(parts) > 1:
            boxes = np.concatenate([b for b, _ in parts]).reshape(-1, 4).astype(np.float32)
            scores = np.concatenate([sc for _, sc in parts]).reshape(-1, 2)
            keep = detector.nms(boxes, scores[:, 0]) if len(boxes) else np.zeros(0, np.int64)
            keyed[k] = (boxes[keep], scores[keep])
        else:
            keyed[k] = parts[0]
    out, index, boxes, scores = carried_flat(keyed, n, width, height)
    keep = np.ones(len(index), bool)
    if len(index):
        run_of = detector.run_ids(index, boxes)
        peak = np.zeros((int(run_of.max()) + 1, 2))
        np.maximum.at(peak, run_of, np.nan_to_num(scores, nan=0.0))
        keep = (peak[run_of, 1] >= scheme.verified) & (peak[run_of, 0] >= scheme.strong)
    return [(b[keep[index == i]], sc[keep[index == i], 0]) for i, (b, sc) in enumerate(out)]


def run_verify(clips, results: dict, keys: list, candidate: float) -> tuple[dict, dict]:
    """For each (box px, crop side, width) key, per clip, per frame with a network result at that width: the
    verification score of each of its boxes scoring ``candidate`` or more (NaN for the others). The frames
    are made once for every key. Also per key: the seconds spent and the crops run."""
    session = detector._session()
    out = {key: [] for key in keys}
    cost = {key: [0.0, 0] for key in keys}
    for index, clip in enumerate(clips):
        per_key = {key: [] for key in keys}
        for i, frame in enumerate(clip.frames()):
            for key in keys:
                box_px, side, width = key
                result = results[width][index][i]
                if result is None:
                    per_key[key].append(None)
                    continue
                boxes, scores = result
                v = np.full(len(boxes), np.nan, np.float32)
                chosen = scores >= candidate
                start = time.perf_counter()
                v[chosen] = detector.verify_boxes(session, frame, boxes[chosen], side, box_px)
                cost[key][0] += time.perf_counter() - start
                cost[key][1] += int(chosen.sum())
                per_key[key].append(v)
        for key in keys:
            out[key].append(per_key[key])
    return out, cost


def truth_overlap(box, truth) -> bool:
    return truth is not None and float(detector._iou(np.asarray([box]), np.asarray([truth]))[0, 0]) >= 0.2


def run_distribution(scheme: Scheme, face_clips, free_clips, face_res, free_res, face_ver, free_ver) -> None:
    """Runs of the scheme played without a filter: the best raw and verification scores of runs on a face
    (a box overlapping the true face by IoU 0.2) and of the others, and the frames each kind spans."""
    base = Scheme(scheme.width, scheme.stride, scheme.threshold, scheme.extra_width, scheme.extra_every,
                  scheme.extra_threshold, 0.0, scheme.verify, 0.0)
    rows = []  # (kind, raw peak, verification peak, frames, band)
    for kind, clips, res, ver in (("face", face_clips, face_res, face_ver), ("free", free_clips, free_res, free_ver)):
        for index, clip in enumerate(clips):
            played = play_verified_scores(base, res, index, clip.length, clip.width, clip.height, ver)
            frames, boxes, scores = played
            if len(frames) == 0:
                continue
            run_of = detector.run_ids(frames, boxes)
            for run in range(int(run_of.max()) + 1):
                members = np.flatnonzero(run_of == run)
                on_face = kind == "face" and any(
                    truth_overlap(boxes[m], clip.truth[frames[m]]) for m in members
                )
                peak = np.nan_to_num(scores[members], nan=0.0).max(axis=0)
                band = ts.band_of(clip.size) if on_face else None
                rows.append(("true" if on_face else "false", float(peak[0]), float(peak[1]), len(members), band))
    print(f"\nruns of {base.label()} without a filter: best raw / verification score")
    for kind in ("true", "false"):
        subset = [r for r in rows if r[0] == kind]
        if not subset:
            continue
        v = np.array([r[2] for r in subset])
        raw = np.array([r[1] for r in subset])
        frames = np.array([r[3] for r in subset])
        q = np.quantile(v, [0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1])
        print(f"  {kind} runs: {len(subset)} ({frames.sum()} boxes); verification quantiles 0/5/10/25/50/75/90/100%: "
              + " ".join(f"{x:.2f}" for x in q))
        for limit in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
            below = v < limit
            print(f"    verification < {limit:.1f}: {below.sum()} runs, {frames[below].sum()} boxes"
                  f" | raw < {limit:.1f}: {(raw < limit).sum()} runs, {frames[raw < limit].sum()} boxes")
        if kind == "true":
            low = sorted((r for r in subset if r[2] < 0.5), key=lambda r: r[2])
            print("    true runs verified below 0.5 (raw, verification, boxes, band): "
                  + ", ".join(f"({r[1]:.2f}, {r[2]:.2f}, {r[3]}, {r[4]})" for r in low[:20]))


def play_verified_scores(scheme, per_width, clip_index, n, width, height, verified):
    """play_verified without the filter, as flat arrays (frame index, boxes, (raw, verification) scores)."""
    box_px, side = scheme.verify
    keys = sorted(set(range(0, n, scheme.stride)) | {n - 1})
    keyed = {k: with_verification(per_width[scheme.width][clip_index][k], scheme.threshold,
                                  verified[(box_px, side, scheme.width)][clip_index][k]) for k in keys}
    _out, index, boxes, scores = carried_flat(keyed, n, width, height)
    return index, boxes, scores


def drop_weak_runs(frames: list, strong: float) -> list:
    """detector.strong_runs on a list of per-frame (boxes, scores)."""
    index = np.concatenate([np.full(len(b), i, np.int32) for i, (b, _s) in enumerate(frames)]).astype(np.int32)
    boxes = np.concatenate([b.reshape(-1, 4) for b, _s in frames]).astype(np.float32)
    scores = np.concatenate([s for _b, s in frames]).astype(np.float32)
    keep = detector.strong_runs(index, boxes, scores, strong)
    return [(b[keep[index == i]], s[keep[index == i]]) for i, (b, s) in enumerate(frames)]


def found_in(boxes, truth) -> bool:
    return any(ts.covers(tuple(b), truth) for b in boxes.tolist())


def evaluate(scheme: Scheme, face_clips, free_clips, face_res: dict, free_res: dict, face_ver=None,
             free_ver=None) -> tuple:
    bands = ts.SIZE_BANDS
    found = {band: [0, 0] for band in bands}
    for index, clip in enumerate(face_clips):
        band = ts.band_of(clip.size)
        played = play(scheme, face_res, index, clip.length, clip.width, clip.height, face_ver)
        for truth, (boxes, _s) in zip(clip.truth, played, strict=True):
            if truth is None:
                continue
            found[band][1] += 1
            found[band][0] += found_in(boxes, truth)
    false_boxes = runs = frames = 0
    for index, clip in enumerate(free_clips):
        played = play(scheme, free_res, index, clip.length, clip.width, clip.height, free_ver)
        previous = False
        for boxes, _s in played:
            false_boxes += len(boxes)
            runs += len(boxes) > 0 and not previous
            previous = len(boxes) > 0
        frames += clip.length
    minutes = frames / FPS / 60
    return found, false_boxes / minutes, runs / minutes


def hand_mask_cover(clip: ts.Clip) -> list[float]:
    """Per frame, the share of the face's true box under the hand's mask (alpha > 0.5), not its bounding square
    as Clip.covered measures it: a face under a share near 1 cannot be seen in that frame."""
    calls = []
    original = ts._paste

    def recording(frame, patch, alpha, x, y):
        calls.append((alpha, x, y))
        return original(frame, patch, alpha, x, y)

    ts._paste = recording
    try:
        for _frame in clip.frames():
            pass
    finally:
        ts._paste = original
    out = []
    for i, truth in enumerate(clip.truth):
        if truth is None:
            out.append(0.0)
            continue
        alpha, hx, hy = calls[2 * i + 1]  # the face is pasted first, then the hand
        x0, y0, x1, y1 = (round(v) for v in truth)
        mask = np.zeros((clip.height, clip.width), bool)
        h, w = alpha.shape
        fx0, fy0, fx1, fy1 = max(0, hx), max(0, hy), min(clip.width, hx + w), min(clip.height, hy + h)
        if fx1 > fx0 and fy1 > fy0:
            mask[fy0:fy1, fx0:fx1] = alpha[fy0 - hy : fy1 - hy, fx0 - hx : fx1 - hx] > 0.5
        out.append(float(mask[y0:y1, x0:x1].mean()) if (x1 > x0 and y1 > y0) else 0.0)
    return out


def causes(face_clips, params: dict, face_res: dict, stride: int) -> None:
    """Recall of faces >= 40 px split by what could cause a miss, 640 px input, threshold 0.2."""
    scheme = Scheme(640, stride)
    rows = []
    for index, clip in enumerate(face_clips):
        if clip.size < 40:
            continue
        p = params[clip.seed]
        under_hand = hand_mask_cover(clip)
        played = play(scheme, face_res, index, clip.length, clip.width, clip.height)
        for i, truth in enumerate(clip.truth):
            if truth is None:
                continue
            boxes, scores = face_res[640][index][i]
            pairs = zip(boxes.tolist(), scores.tolist(), strict=True)
            seen = [float(s) for b, s in pairs if ts.covers(tuple(b), truth)]
            x0, y0, x1, y1 = truth
            rows.append(
                {
                    "found": found_in(played[i][0], truth),
                    "best": max(seen, default=0.0),
                    "band": f"{ts.band_of(clip.size)[0]}-{ts.band_of(clip.size)[1]}px",
                    "cover": clip.covered[i],
                    "mask": under_hand[i],
                    "angle": abs(p.angle),
                    "blur": p.blur,
                    "bright": p.brightness,
                    "lfw": p.source.startswith("lfw"),
                    "edge": x0 <= 0 or y0 <= 0 or x1 >= clip.width or y1 >= clip.height,
                }
            )
    splits = [
        ("hand cover 0", lambda r: r["cover"] == 0),
        ("hand cover 0-30%", lambda r: 0 < r["cover"] < 0.3),
        ("hand cover >=30%", lambda r: r["cover"] >= 0.3),
        ("under the hand's mask < 20%", lambda r: r["mask"] < 0.2),
        ("under the hand's mask 20-50%", lambda r: 0.2 <= r["mask"] < 0.5),
        ("under the hand's mask >= 50%", lambda r: r["mask"] >= 0.5),
        ("|angle| < 10", lambda r: r["angle"] < 10),
        ("|angle| >= 10", lambda r: r["angle"] >= 10),
        ("no blur", lambda r: r["blur"] == 0),
        ("blurred", lambda r: r["blur"] > 0),
        ("blurred, mask < 50%", lambda r: r["blur"] > 0 and r["mask"] < 0.5),
        ("not blurred, mask < 50%", lambda r: r["blur"] == 0 and r["mask"] < 0.5),
        ("brightness < 0.8", lambda r: r["bright"] < 0.8),
        ("brightness >= 0.8", lambda r: r["bright"] >= 0.8),
        ("LFW face (25 px source)", lambda r: r["lfw"]),
        ("portrait (astronaut/cameraman)", lambda r: not r["lfw"]),
        ("cut by the frame edge", lambda r: r["edge"]),
        ("inside the frame", lambda r: not r["edge"]),
    ]
    for band in ("40-80px", "80-160px", "160-300px"):
        splits.append((f"band {band}", lambda r, band=band: r["band"] == band))
    print(f"\nwhere the misses are: faces >= 40 px, input 640, threshold 0.2, stride {stride}")
    print("  cause                           | frames | recall | best network score on missed frames: 0 / <0.1 / <0.2")
    for name, test in splits:
        subset = [r for r in rows if test(r)]
        if not subset:
            continue
        recall = sum(r["found"] for r in subset) / len(subset)
        missed = [r["best"] for r in subset if not r["found"]]
        zero = sum(b == 0 for b in missed)
        low = sum(0 < b < 0.1 for b in missed)
        mid = sum(0.1 <= b < 0.2 for b in missed)
        print(f"  {name:31s} | {len(subset):6d} | {recall:6.1%} | {len(missed)} missed: {zero} / {low} / {mid}")
    per_clip = {}
    for index, clip in enumerate(face_clips):
        if clip.size < 40:
            continue
        played = play(scheme, face_res, index, clip.length, clip.width, clip.height)
        hits = [found_in(played[i][0], t) for i, t in enumerate(clip.truth) if t is not None]
        p = params[clip.seed]
        per_clip[clip.seed] = (clip.size, p, sum(hits), len(hits), max(clip.covered))
    print("  per clip: seed size source angle blur brightness max-cover found/frames")
    for seed, (size, p, hit, total, cover) in per_clip.items():
        print(
            f"    {seed} {size:4d} {p.source:10s} {p.angle:6.1f} {p.blur:5.2f} {p.brightness:5.2f} "
            f"{cover:5.2f} {hit}/{total}"
        )


def encode(path: Path, clip: ts.Clip) -> None:
    """The clip as a 720p H.264 file."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=FPS, options={"preset": "veryfast", "crf": "20"})
        stream.width, stream.height, stream.pix_fmt = clip.width, clip.height, "yuv420p"
        for image in clip.frames():
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode())


def decode_seconds(path: Path, width: int) -> float:
    """Seconds per frame to decode the clip and scale it to the network's size (no network)."""
    net_w, net_h = detector.network_size(1280, 720, width)
    start = time.perf_counter()
    n = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            frame.to_ndarray(width=net_w, height=net_h, format="rgb24")
            n += 1
    return (time.perf_counter() - start) / n


def schemes() -> list[Scheme]:
    out = [Scheme(640, s) for s in (1, 2, 3, 4)]
    out += [Scheme(960, s) for s in (1, 2, 3, 4, 5, 8)]
    out += [Scheme(1280, s) for s in (1, 2, 4, 6, 8)]
    for t in (0.1, 0.15):
        out += [Scheme(640, 2, threshold=t), Scheme(640, 4, threshold=t), Scheme(960, 4, threshold=t)]
        out += [Scheme(1280, 8, threshold=t)]
    for strong in (0.3, 0.4, 0.5):
        out += [Scheme(640, 2, threshold=t, strong=strong) for t in (0.1, 0.15, 0.2)]
        out += [Scheme(640, 3, threshold=t, strong=strong) for t in (0.1, 0.2)]
        out += [Scheme(640, 4, threshold=t, strong=strong) for t in (0.1, 0.15, 0.2)]
        out += [Scheme(960, 4, threshold=t, strong=strong) for t in (0.1, 0.2)]
        out += [Scheme(1280, 8, threshold=t, strong=strong) for t in (0.1, 0.2)]
    for extra, every in ((960, 8), (960, 12), (1280, 8), (1280, 12), (1280, 16)):
        for stride in (2, 3, 4):
            if every % stride == 0:
                out.append(Scheme(640, stride, extra_width=extra, extra_every=every))
                for t, strong in ((0.15, 0.4), (0.2, 0.4), (0.1, 0.5)):
                    out.append(
                        Scheme(640, stride, threshold=t, extra_width=extra, extra_every=every, extra_threshold=t,
                               strong=strong)
                    )
    return out


def verify_schemes(configs: list, candidate: float) -> list[Scheme]:
    """Schemes whose runs are kept on their best verification score instead of (or as well as) their raw peak."""
    out = []
    for config in configs:
        for floor in (0.3, 0.4, 0.5, 0.6, 0.7):
            for t in sorted({candidate, 0.2}):
                out.append(Scheme(640, 4, t, verify=config, verified=floor))
                out.append(Scheme(1280, 8, t, verify=config, verified=floor))
                out.append(Scheme(1280, 4, t, verify=config, verified=floor))
            out.append(Scheme(640, 4, candidate, extra_width=1280, extra_every=8, extra_threshold=candidate,
                              verify=config, verified=floor))
            out.append(Scheme(1280, 8, candidate, strong=0.3, verify=config, verified=floor))
            out.append(Scheme(1280, 16, candidate, verify=config, verified=floor))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=24, help="clips with a face (spread over the size bands)")
    parser.add_argument("--free", type=int, default=48, help="face-free clips")
    parser.add_argument("--length", type=int, default=16, help="frames per face clip")
    parser.add_argument("--free-length", type=int, default=16, help="frames per face-free clip")
    parser.add_argument("--widths", type=int, nargs="+", default=[640, 960, 1280])
    parser.add_argument("--wide-every", type=int, default=4, help="inputs wider than 640 run on every n-th frame "
                        "(and the last) only: schemes that need other frames at that width are left out")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the first clip (bench/faces.py's scheme)")
    parser.add_argument("--cache", type=Path, help="pickle of the per-frame network results (made if missing)")
    parser.add_argument("--fps-frames", type=int, default=96, help="frames of the encoded 720p clip timed")
    parser.add_argument("--fps-rounds", type=int, default=2, help="timings of each detect_video configuration")
    parser.add_argument("--free-minutes", type=float, default=0.0, help="minutes of bench/faces.py's long face-free "
                        "video (testset.free_video, same seed) added to the face-free clips")
    parser.add_argument("--every", type=int, default=1, help="the 640 px input runs on every n-th frame (and the "
                        "last) only; above 1 the causes of misses (which need every frame) are not printed")
    parser.add_argument("--long-every", type=int, default=4, help="on the long face-free video every input runs "
                        "on every n-th frame at most (schemes whose strides are multiples of it)")
    parser.add_argument("--verify", nargs="*", default=[], metavar="BOX/SIDE",
                        help="verification stages to measure: candidate boxes scaled to BOX px in a SIDE px crop")
    parser.add_argument("--candidate", type=float, default=0.1, help="lowest network score verified")
    parser.add_argument("--table", choices=("all", "verify"), default="all",
                        help="'verify': only the current settings and the schemes with a verification stage")
    args = parser.parse_args()

    face_clips, free_clips, params = build(args)
    if args.free_minutes > 0:
        free_clips.append(ts.free_video(args.seed + 30_000, args.free_minutes, fps=FPS))
    print(f"detector {detector.detector_id()} on 1280x720")
    print(f"{len(face_clips)} face clips x {args.length} frames, {args.free} face-free x {args.free_length}"
          f" + {args.free_minutes:g} min of face-free video")
    print(f"load {os.getloadavg()}")
    face_res, free_res, net_unit, verified = {}, {}, {}, {}
    if args.cache and args.cache.exists():
        cached = pickle.loads(args.cache.read_bytes())  # noqa: S301 (this script's own cache)
        face_res, free_res, net_unit = cached[:3]
        verified = cached[3] if len(cached) > 3 else {}
        print(f"per-frame results from {args.cache.name} for widths {sorted(net_unit)}")

    def save() -> None:
        if args.cache:
            args.cache.write_bytes(pickle.dumps((face_res, free_res, net_unit, verified)))

    for width in args.widths:
        if width not in net_unit:
            every = args.every if width <= 640 else args.wide_every
            face_res[width], net_a, runs_a = run_network(face_clips, width, every)
            free_res[width], net_b, runs_b = run_network(free_clips, width, every, args.long_every)
            net_unit[width] = (net_a + net_b) / (runs_a + runs_b)
            save()
        print(f"network at {width}: {net_unit[width] * 1000:.1f} ms a frame ({1 / net_unit[width]:.1f} fps), "
              f"load {os.getloadavg()}")
    configs = [tuple(int(x) for x in text.split("/")) for text in args.verify]
    missing = [(box_px, side, width) for box_px, side in configs for width in args.widths
               if (box_px, side, width) not in verified]
    if missing:
        face_v, face_cost = run_verify(face_clips, face_res, missing, args.candidate)
        free_v, free_cost = run_verify(free_clips, free_res, missing, args.candidate)
        for key in missing:
            width = key[2]
            analysed = sum(r is not None for res in (*face_res[width], *free_res[width]) for r in res)
            crops = face_cost[key][1] + free_cost[key][1]
            seconds = face_cost[key][0] + free_cost[key][0]
            verified[key] = (face_v[key], free_v[key], seconds / max(1, crops), crops / analysed)
        save()
    for key in sorted(verified):
        _f, _v, unit, per_frame = verified[key]
        print(f"verification {key[0]}/{key[1]} at {key[2]}: {unit * 1000:.1f} ms a crop, "
              f"{per_frame:.2f} candidates (score >= {args.candidate:g}) per analysed frame")
    face_ver = {key: value[0] for key, value in verified.items()}
    free_ver = {key: value[1] for key, value in verified.items()}

    if args.every == 1:
        causes(face_clips, params, face_res, 1)
        causes(face_clips, params, face_res, detector.DEFAULT_STRIDE)
    for box_px, side in configs:
        for width, stride in ((640, 4), (1280, 8)):
            if width in args.widths:
                run_distribution(Scheme(width, stride, threshold=args.candidate, verify=(box_px, side)),
                                 face_clips, free_clips, face_res, free_res, face_ver, free_ver)

    decode_unit = None
    path_ctx = tempfile.TemporaryDirectory(prefix="ceres-faces-candidates-")
    with path_ctx as tmp:
        path = Path(tmp) / "clip.mp4"
        if args.fps_frames:
            encode(path, ts.make_clip(args.seed + 20_000, length=args.fps_frames, band=(40, 160)))
            decode_unit = {w: decode_seconds(path, w) for w in net_unit}

        bands = ts.SIZE_BANDS
        print("\nschemes (threshold t; 'runs>=x': runs of boxes whose best score stays below x dropped)")
        head = " | ".join(f"{lo}-{hi}px" for lo, hi in bands)
        print(f"  {'scheme':52s} | {head} | >=40px | false/min (runs/min) | net cost | predicted fps")
        chosen = schemes() if args.table == "all" else [Scheme(640, 4, 0.1, strong=0.3)]
        chosen += verify_schemes(configs, args.candidate)
        for scheme in chosen:
            if scheme.width not in net_unit or (scheme.extra_width and scheme.extra_width not in net_unit):
                continue
            if scheme.verify and any((*scheme.verify, w) not in verified for w in (scheme.width, scheme.extra_width)
                                     if w):
                continue
            try:
                found, false_min, runs_min = evaluate(scheme, face_clips, free_clips, face_res, free_res,
                                                      face_ver, free_ver)
            except (TypeError, IndexError):  # a frame that this width was not run on
                continue
            big = [found[b] for b in bands if b[0] >= 40]
            big_recall = sum(f for f, _ in big) / max(1, sum(t for _, t in big))
            cells = " | ".join(f"{f / t:6.1%}" if t else "   n/a" for f, t in found.values())
            # the network's work grows with its input's pixels: the cost relative to 640 px on every frame
            # is counted from them (timings taken at different moments of a shared machine's load are not
            # comparable); the predicted fps uses the measured times
            cost = scheme.cost(net_unit)
            relative = scheme.cost({w: pixels(w) for w in net_unit}) / pixels(640)
            predicted = ""
            if decode_unit:
                predicted = f"{1 / (cost + decode_unit[max(scheme.width, scheme.extra_width)]):6.1f}"
            print(
                f"  {scheme.label():52s} | {cells} | {big_recall:6.1%} | {false_min:6.1f} ({runs_min:5.1f}) | "
                f"{relative:5.2f}x | {predicted}"
            )
        if args.fps_frames:
            print("\ndecode+scale per frame: " + ", ".join(f"{w}: {s * 1000:.1f} ms" for w, s in decode_unit.items()))
            configurations = [
                (640, 2, 0.2, 0.0),  # the detector's settings before bench/faces_candidates.py
                (detector.DEFAULT_INPUT_WIDTH, detector.DEFAULT_STRIDE, detector.DEFAULT_THRESHOLD,
                 detector.DEFAULT_MIN_PEAK),
            ]
            for _round in range(args.fps_rounds):  # alternated, so that a change of load hits both alike
                for width, stride, threshold, peak in configurations:
                    start = time.perf_counter()
                    result = detector.detect_video(
                        path, stride=stride, input_width=width, threshold=threshold, min_peak=peak
                    )
                    seconds = time.perf_counter() - start
                    print(
                        f"detect_video {width}/s{stride}/t{threshold:g} runs>={peak:g}: {result.frame_count} frames "
                        f"in {seconds:.2f} s = {result.frame_count / seconds:.1f} fps, load {os.getloadavg()}"
                    )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
