"""Verification benchmark (prints figures; not a test).

    .venv/bin/python bench/verify.py [--shards 20] [--seconds 60 180] [--size 640x360] [--repeat 5] [--work DIR]

Exports ``--shards`` generated captures (as ``bench/assemble.py`` does, reusing those already in ``--work``),
then times, in alternating paired runs on a warm page cache:

- ``python -m exporter verify SHARD...``: every shard against its receipt (file list, sizes, SHA-256), its
  files hashed a few at a time in 1 MiB blocks;
- ``sha256sum`` of the same files (coreutils, one file after another), the floor of hashing every byte once.

Prints the bytes, each run's seconds, the medians, GB/s, and sha256sum / verify (at least 1.0 means verify is
as fast as hashing the bytes with sha256sum).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assemble import shards  # bench/assemble.py: the same generated shards

from exporter.receipt import RECEIPT, folder_files


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, check=False)
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{command[:4]} exited {result.returncode}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--seconds", type=float, nargs=2, default=(60.0, 180.0), metavar=("SHORTEST", "LONGEST"))
    parser.add_argument("--size", default="640x360")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=Path, help="folder kept between runs (default: a scratch folder)")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))

    with tempfile.TemporaryDirectory(prefix="ceres-bench-verify-") as scratch:
        work = args.work or Path(scratch)
        paths = shards(work, args.shards, tuple(args.seconds), size)
        files = [str(shard / name) for shard in paths for name in folder_files(shard) if name != RECEIPT]
        total = sum(os.path.getsize(name) for name in files)
        verify = [sys.executable, "-m", "exporter", "verify", *map(str, paths)]
        sha256sum = ["sha256sum", *files]
        _timed(verify), _timed(sha256sum)  # warm the page cache
        print(f"# verify: {len(paths)} shards, {len(files)} files, {total / 1e6:.0f} MB, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}\n")
        print("| run | exporter verify s | sha256sum s |")
        print("| --- | --- | --- |")
        ours, theirs = [], []
        for n in range(args.repeat):
            ours.append(_timed(verify))
            theirs.append(_timed(sha256sum))
            print(f"| {n + 1} | {ours[-1]:.3f} | {theirs[-1]:.3f} |", flush=True)
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"\nexporter verify: median {a:.3f} s, {total / a / 1e9:.2f} GB/s")
        print(f"sha256sum:       median {b:.3f} s, {total / b / 1e9:.2f} GB/s")
        print(f"sha256sum / verify: {b / a:.2f}x (goal >= 1.0)")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
