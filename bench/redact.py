"""Redaction benchmark (prints figures; not a test).

    .venv/bin/python bench/redact.py [--seconds 60] [--width 1280] [--height 720] [--every 3] [--work DIR]

Generates an aligned 30 Hz capture with an H.264 camera (a keyframe every 2 s) and exports it (both reused
from ``--work`` when an earlier run left them), then derives a redacted shard with ``redact_shard``: a
moving 120x150 px box on every frame of every ``--every``-th GOP (``--every 3``: about a third of the
GOPs). Prints the wall time, its ratio to the episode's duration, the GOPs and frames re-encoded and the
process's peak RSS. The redaction runs in this process, on whatever cores PyAV's encoder and decoder
take (x264 uses its own threads).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporter.generate import generate_capture
from exporter.redact import redact_shard
from exporter.shard import export_shard

RATE = 30
KEYFRAME_SECONDS = 2  # the synthetic recorder's camera


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--every", type=int, default=3, help="boxes on every frame of every N-th GOP")
    parser.add_argument("--work", type=Path, help="folder kept between runs (default: a temporary one)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-redact-"))
    name = f"{args.seconds:g}s-{args.width}x{args.height}"
    capture = work / f"capture-{name}"
    if not capture.exists():
        generate_capture(capture, seconds=args.seconds, retries=0, width=args.width, height=args.height)
    shard = work / f"shards-{name}" / "episode-000000"
    if not shard.exists():
        export_shard(capture, shard.parent)
    frames = round(args.seconds * RATE)
    gop = KEYFRAME_SECONDS * RATE
    boxes = {}
    for start in range(0, frames, gop * args.every):
        for frame in range(start, min(start + gop, frames)):
            x = 100 + (frame * 7) % (args.width - 400)
            boxes[frame] = [(x, 200.0, x + 120.0, 350.0)]
    dest = work / f"redacted-{name}"
    shutil.rmtree(dest, ignore_errors=True)
    start = time.perf_counter()
    result = redact_shard(shard, dest, boxes, record={"bench": True})
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{name} episode, {len(boxes)} of {frames} frames boxed")
    print(f"  {result.method}: {result.gops_reencoded} of {result.gops} GOPs re-encoded "
          f"({result.frames_reencoded} frames), {result.gops_copied} copied")
    print(f"  redaction {seconds:.2f} s wall = {seconds / args.seconds:.3f} x the episode's duration "
          f"({args.seconds / seconds:.1f}x real time); peak RSS {peak_mb:.0f} MB")
    if args.work is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
