"""Release review benchmark (prints figures; not a test).

    .venv/bin/python bench/review.py [--minutes 10] [--work DIR]

Exports a long generated capture (30 Hz, a small camera) once, then times what the release side reads of a
shard: the review viewer's data (``exporter.review``: full rate and downsampled to its 2000-frame cap) with the
size of its JSON, and the gate's leak scan of every file of the shard (``exporter.leaks``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporter.generate import generate_capture
from exporter.leaks import find_leaks, raw_identifiers
from exporter.review import MAX_SAMPLES, episode_review
from exporter.shard import export_shard

RATE = 30


def timed(call, repeat: int = 3):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="ceres-bench-review-"))
    shard = work / "out" / "episode-000000"
    if not shard.exists():
        source = generate_capture(work / "capture", seconds=args.minutes * 60, rate_hz=RATE, seed=7, width=160,
                                  height=120)
        export_shard(source, work / "out")
    identifiers = raw_identifiers(json.loads((work / "capture" / "capture.json").read_text()))
    data = next(shard.glob("data/chunk-*/file-*.parquet"))
    metadata = json.loads((shard / "ceres/episode-metadata.json").read_text())
    segments = metadata["segments"]

    full_s, full = timed(lambda: episode_review(data, fps=RATE, segments=segments, max_samples=10**9))
    capped_s, capped = timed(lambda: episode_review(data, fps=RATE, segments=segments))
    encode_s, body = timed(lambda: json.dumps(capped, separators=(",", ":")))
    scan_s, problems = timed(lambda: find_leaks(shard, identifiers), repeat=1)
    shard_bytes = sum(p.stat().st_size for p in shard.rglob("*") if p.is_file())
    print(f"episode: {full['length']} frames ({args.minutes:g} min at {RATE} Hz), shard {shard_bytes / 1e6:.1f} MB")
    print(f"review data, every frame:      {full_s * 1000:7.1f} ms, JSON "
          f"{len(json.dumps(full, separators=(',', ':'))) / 1e6:.1f} MB")
    print(f"review data, {MAX_SAMPLES} frames cap:  {capped_s * 1000:7.1f} ms (+ {encode_s * 1000:.1f} ms JSON), "
          f"JSON {len(body) / 1e6:.2f} MB, step {capped['step']}")
    print(f"leak scan of the whole shard:  {scan_s * 1000:7.1f} ms, {len(problems)} problems")


if __name__ == "__main__":
    main()
