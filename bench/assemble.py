"""Assembly benchmark (prints figures; not a test).

    .venv/bin/python bench/assemble.py [--shards 20] [--seconds 60 180] [--size 640x360] [--repeat 3]
                                       [--work DIR] [--warmup 1]

Exports ``--shards`` generated captures apart (each as episode 0, global index 0, with one shared task
table), their lengths spread evenly over ``--seconds`` (default one to three minutes), then times,
in alternating paired runs:

- ``python -m exporter assemble OUT SHARD... --order given`` in a child process (peak RSS from wait4);
- the floor: ``cp -r`` of the shard folders, then ``sha256sum`` of every copied file (a copy and one
  hash of every byte: what verifying and laying over the shards cannot avoid).

Before each timed run the page cache's dirty pages are written out (``os.sync``, not timed), so neither side pays
for writing back what the run before it wrote. The assembly is timed from its start to its end by the small
process that reads its peak RSS (that process's own start-up is not counted). It runs as it does on a user's
machine after the first time: ``--warmup`` untimed assemblies first (default one), with the interpreter allowed to
write the project's bytecode (``PYTHONDONTWRITEBYTECODE`` is removed from the child's environment), so the timed
runs do not compile the exporter's modules (about 40 ms each where that variable is set).

Shards already exported in ``--work`` by an earlier run with the same arguments are reused. For a
thousand shards: ``--shards 1000 --seconds 2 2 --size 160x120``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporter.generate import TASKS, generate_capture
from exporter.shard import export_shard

ROOT = Path(__file__).resolve().parents[1]


def shards(work: Path, count: int, seconds: tuple[float, float], size: tuple[int, int]) -> list[Path]:
    """Exported shards in ``work`` (made once and reused), each exported apart as episode 0."""
    folder = work / f"shards-{count}-{seconds[0]:g}-{seconds[1]:g}-{size[0]}x{size[1]}"
    done = folder / "done"
    paths = [folder / f"shard-{i:04d}" / "episode-000000" for i in range(count)]
    if done.exists():
        return paths
    shutil.rmtree(folder, ignore_errors=True)
    for i in range(count):
        length = seconds[0] + (seconds[1] - seconds[0]) * (i / max(1, count - 1))
        capture = generate_capture(
            folder / "captures" / f"capture-{i:04d}",
            seconds=length,
            seed=1000 + i,
            retries=0,
            width=size[0],
            height=size[1],
            task_spec=False,
        )
        export_shard(capture, folder / f"shard-{i:04d}", tasks=list(TASKS))
        shutil.rmtree(capture)
    done.touch()
    return paths


# Peak RSS is read by a small intermediate process: a child's maxrss also counts the memory of the
# process it was forked from (up to its exec). The intermediate also times the child, from just before it is
# started to its end, so that the intermediate's own start-up (a Python interpreter) is not counted.
MEASURE = (
    "import os, subprocess, sys, time; t = time.perf_counter(); "
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL); _, s, u = os.wait4(p.pid, 0); "
    "print(time.perf_counter() - t, u.ru_maxrss, file=sys.stderr); sys.exit(os.waitstatus_to_exitcode(s))"
)


# The assembly runs as on a user's machine: bytecode written once and read after (this variable forbids writing it).
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def child(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a child process."""
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True, text=True, cwd=ROOT,
                          env=CHILD_ENV)
    if done.returncode:
        raise SystemExit(f"{command[:4]} failed: {done.stderr}")
    seconds, rss = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(rss) / 1024


def settle() -> None:
    """Before each timed run: the files the runs before wrote go to the disk first (not timed), so that neither side
    is timed while the kernel writes back the other's output."""
    os.sync()


def assemble(paths: list[Path], out: Path) -> tuple[float, float]:
    shutil.rmtree(out, ignore_errors=True)
    settle()
    return child([sys.executable, "-m", "exporter", "assemble", str(out), *map(str, paths), "--order", "given"])


def floor(paths: list[Path], out: Path) -> tuple[float, float]:
    """cp -r of the shards, then sha256sum of every copied file: seconds of each."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    settle()
    start = time.perf_counter()
    subprocess.run(["cp", "-r", *map(str, [p.parent for p in paths]), str(out)], check=True)
    copied = time.perf_counter() - start
    files = [str(p) for p in sorted(out.rglob("*")) if p.is_file()]
    start = time.perf_counter()
    for first in range(0, len(files), 500):
        subprocess.run(["sha256sum", *files[first : first + 500]], check=True, stdout=subprocess.DEVNULL)
    return copied, time.perf_counter() - start


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):7.2f}  (min {min(values):.2f}, max {max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--seconds", type=float, nargs=2, default=(60.0, 180.0), metavar=("SHORTEST", "LONGEST"))
    parser.add_argument("--size", default="640x360", help="camera WIDTHxHEIGHT")
    parser.add_argument("--repeat", type=int, default=3, help="paired runs")
    parser.add_argument("--work", type=Path, help="folder for shards and outputs (default: a temp folder)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed assemblies first (they write the bytecode)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="ceres-bench-assemble-"))
    work.mkdir(parents=True, exist_ok=True)
    size = tuple(int(v) for v in args.size.split("x"))
    print(f"work folder: {work}")
    start = time.perf_counter()
    paths = shards(work, args.shards, tuple(args.seconds), size)
    total = sum(p.stat().st_size for s in paths for p in s.rglob("*") if p.is_file())
    print(f"{len(paths)} shards, {total / 2**20:.0f} MiB (ready in {time.perf_counter() - start:.0f} s)")

    for _ in range(args.warmup):
        assemble(paths, work / "dataset")
    runs: dict[str, list[float]] = {"assemble": [], "cp": [], "hash": [], "rss": []}
    for repeat in range(args.repeat):
        order = ("assemble", "floor") if repeat % 2 == 0 else ("floor", "assemble")
        for what in order:
            if what == "assemble":
                seconds, rss = assemble(paths, work / "dataset")
                runs["assemble"].append(seconds)
                runs["rss"].append(rss)
            else:
                copied, hashed = floor(paths, work / "copy")
                runs["cp"].append(copied)
                runs["hash"].append(hashed)
        print(
            f"  run {repeat + 1}: assemble {runs['assemble'][-1]:.2f} s ({runs['rss'][-1]:.0f} MiB), "
            f"cp -r {runs['cp'][-1]:.2f} s, sha256sum {runs['hash'][-1]:.2f} s",
            flush=True,
        )
    pairs = list(zip(runs["assemble"], runs["cp"], runs["hash"], strict=True))
    print(f"  assemble (s)                 {spread(runs['assemble'])}")
    print(f"  peak RSS of assemble (MiB)   {spread(runs['rss'])}")
    print(f"  cp -r (s)                    {spread(runs['cp'])}")
    print(f"  cp -r + sha256sum (s)        {spread([c + h for _, c, h in pairs])}")
    print(f"  assemble / cp -r             {spread([a / c for a, c, _ in pairs])}")
    print(f"  assemble / (cp -r + hash)    {spread([a / (c + h) for a, c, h in pairs])}")
    shutil.rmtree(work / "dataset", ignore_errors=True)
    shutil.rmtree(work / "copy", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
