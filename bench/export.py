"""Export benchmark (prints figures; not a test).

    .venv/bin/python bench/export.py [--minutes 10] [--repeat 3] [--tile 1] [--retry-minutes 1] [--work DIR]

A capture already generated in ``--work`` (by an earlier run with the same arguments) is reused.
``--tile 3`` with ``--minutes 60`` exports a three-hour capture made by repeating the hour (journal and
camera packets moved on in time), which takes minutes instead of generating three hours.

1. Generates an aligned 30 Hz capture with a 1280x720 H.264 camera and exports it with
   ``python -m exporter export`` in a child process (its peak RSS read with wait4).
2. Measures the floor for the same capture: PyAV stream copy of the camera file, a pyarrow write of the
   exported data table (read before the clock starts), and SHA-256 of those outputs. The floor writes the
   table with pyarrow's defaults (the issue's anchor); a second floor writes it as the export does, with a
   dictionary only for the columns that repeat, and its ratio is printed too. Export and floor
   alternate ``--repeat`` times (paired runs); medians and spread are printed, of wall time and of CPU
   (user + sys: the export's child with its own children, the floor in this process), which moves much
   less with the machine's load. One untimed export comes first, with the interpreter allowed to write the
   project's bytecode (``PYTHONDONTWRITEBYTECODE`` is removed from the exports' environment), so the timed exports
   run as they do on a user's machine from the second run on, without compiling the exporter's modules.
3. Generates a capture with five retries and times its video export: smart cut (copy untouched GOPs,
   re-encode the cut ones) against a full re-encode of the kept frames (``--retry-minutes 0`` skips it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporter import video
from exporter.features import DATA_FEATURES, dictionary_columns
from exporter.generate import generate_capture

RATE = 30
ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 1280, 720


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def timed(label: str, action):
    start = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - start
    print(f"  {label:<44} {seconds:8.2f} s", flush=True)
    return result, seconds


def stream_copy(src: Path, dst: Path) -> None:
    with av.open(str(src)) as source, av.open(str(dst), "w", options={"movflags": "+faststart"}) as output:
        stream = source.streams.video[0]
        target = output.add_stream_from_template(stream)
        for packet in source.demux(stream):
            if packet.size:
                packet.stream = target
                output.mux(packet)


def floor(camera: Path, table: pa.Table, work: Path, **write_options) -> None:
    stream_copy(camera, work / "floor.mp4")
    pq.write_table(table, work / "floor.parquet", **write_options)
    for path in (work / "floor.mp4", work / "floor.parquet"):
        sha256(path)


# Peak RSS is read by a small intermediate process: a child's maxrss also counts the memory of the
# process it was forked from (up to its exec), and this benchmark holds large tables.
# It also prints the child's CPU (user + sys, its own children included), which moves much less with the
# machine's load than wall time.
MEASURE = (
    "import os, resource, subprocess, sys; p = subprocess.Popen(sys.argv[1:]); _, s, u = os.wait4(p.pid, 0); "
    "c = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(u.ru_maxrss, c.ru_utime + c.ru_stime, file=sys.stderr); sys.exit(os.waitstatus_to_exitcode(s))"
)


# The exports run as on a user's machine: bytecode written once and read after (this variable forbids writing it).
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def export(command: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MiB) and summary line of one export in a child process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True, text=True, cwd=ROOT,
                          env=CHILD_ENV)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(done.stderr)
    rss, cpu = done.stderr.strip().splitlines()[-1].split()
    return seconds, float(cpu), int(rss) / 1024, done.stdout.strip()


def cpu_seconds() -> float:
    """CPU (user + sys) of this process so far: the floor runs in it, on one thread."""
    return time.process_time()


def reference_table(command: list[str], shard: Path) -> pa.Table:
    """The data table the floor writes: that of an export made before the clock starts (which also writes the
    exporter's bytecode)."""
    if not shard.exists():
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT, env=CHILD_ENV)
    return pq.read_table(shard / "data/chunk-000/file-000.parquet")


def spread(values: list[float]) -> str:
    middle = statistics.median(values)
    return f"median {middle:7.2f}  (min {min(values):.2f}, max {max(values):.2f}, {len(values)} runs)"


def copied_frames(camera: Path, out: Path) -> int:
    with av.open(str(camera)) as source, av.open(str(out)) as output:
        source_packets = {bytes(p) for p in source.demux(source.streams.video[0]) if p.size}
        return sum(bytes(p) in source_packets for p in output.demux(output.streams.video[0]) if p.size)


def retained_slot_times(source: Path) -> np.ndarray:
    """Nominal slot times of the rows: slots of the non-retry segments (segment records only)."""
    with open(source / "journal.ndjson", encoding="utf-8") as journal:
        first = json.loads(journal.readline())
        segments = {}
        for line in journal:
            if '"segment"' in line:
                record = json.loads(line)
                segments[(record["cycle"], record["repetition"], record["take"])] = record
    slots = np.concatenate(
        [
            np.arange(s["start_slot"], s["end_slot"])
            for s in sorted(segments.values(), key=lambda s: s["start_slot"])
            if s["outcome"] != "retry"
        ]
    )
    return first["t"] + (slots - first["slot"]) / RATE


def tiled(source: Path, out_dir: Path, times: int) -> Path:
    """A capture ``times`` as long as the aligned ``source``: its journal repeated with slots, times and
    segment cycles moved on, and its camera's packets repeated with moved timestamps (no re-encoding)."""
    if (out_dir / "capture.json").is_file():
        print(f"  reusing {out_dir}")
        return out_dir
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "media").mkdir(parents=True)
    records = [json.loads(line) for line in (source / "journal.ndjson").open(encoding="utf-8")]
    slots = max(r["end_slot"] for r in records if r["type"] == "segment")
    cycles = max(r["cycle"] for r in records if r["type"] == "segment") + 1
    with (staging / "journal.ndjson").open("w", encoding="utf-8") as journal:
        for k in range(times):
            for record in records:
                moved = dict(record)
                if record["type"] == "segment":
                    moved.update(cycle=record["cycle"] + k * cycles)
                    moved.update(start_slot=record["start_slot"] + k * slots, end_slot=record["end_slot"] + k * slots)
                else:
                    moved.update(slot=record["slot"] + k * slots, t=record["t"] + k * slots / RATE)
                journal.write(json.dumps(moved, separators=(",", ":")) + "\n")
    with av.open(str(source / "media/camera.mp4")) as camera:
        stream = camera.streams.video[0]
        shift = round(slots / RATE / stream.time_base)
        with av.open(str(staging / "media/camera.mp4"), "w") as output:
            target = output.add_stream_from_template(stream)
            for k in range(times):
                camera.seek(0, stream=stream)
                for packet in camera.demux(stream):
                    if packet.size:
                        packet.pts, packet.dts = packet.pts + k * shift, packet.dts + k * shift
                        packet.stream = target
                        output.mux(packet)
    for name in ("capture.json", "task-specification.json"):
        if (source / name).exists():
            shutil.copyfile(source / name, staging / name)
    staging.rename(out_dir)
    return out_dir


def generated(out_dir: Path, **options) -> Path:
    """The capture in `out_dir`, generated unless an earlier run left it there."""
    if (out_dir / "capture.json").is_file():
        print(f"  reusing {out_dir}")
        return out_dir
    return generate_capture(out_dir, rate_hz=RATE, width=WIDTH, height=HEIGHT, **options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the aligned capture")
    parser.add_argument("--repeat", type=int, default=3, help="paired export/floor runs")
    parser.add_argument(
        "--tile", type=int, default=1, help="export a capture this many times as long (the aligned one repeated)"
    )
    parser.add_argument("--retry-minutes", type=float, default=1.0, help="length of the capture with retries")
    parser.add_argument("--work", type=Path, help="folder for captures and shards (default: a temp folder)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="ceres-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work}")

    print(f"aligned capture: {args.minutes:g} min, {RATE} Hz, {WIDTH}x{HEIGHT} H.264")
    source, _ = timed(
        "generate",
        lambda: generated(work / "aligned", seconds=args.minutes * 60, retries=0, seed=1),
    )
    if args.tile > 1:
        print(f"tiled {args.tile} times: {args.minutes * args.tile:g} min")
        source, _ = timed("tile", lambda: tiled(source, work / f"aligned-x{args.tile}", args.tile))
        args.minutes *= args.tile
    command = [sys.executable, "-m", "exporter", "export", str(source), str(work / "shards")]
    camera = source / "media/camera.mp4"
    shard = work / "shards" / "episode-000000"
    runs: dict[str, list[float]] = {"export": [], "floor": [], "rss": [], "export_cpu": [], "floor_cpu": [],
                                    "floor_options": []}
    # the floor writes with pyarrow's defaults; the second one as the export writes its data parquet
    export_options = {"use_dictionary": dictionary_columns(list(DATA_FEATURES))}
    shutil.rmtree(work / "shards", ignore_errors=True)
    table = reference_table(command, shard)  # the untimed first export
    for repeat in range(args.repeat):
        for what in ("export", "floor") if repeat % 2 == 0 else ("floor", "export"):
            if what == "export":
                shutil.rmtree(work / "shards", ignore_errors=True)
                (seconds, used, rss, summary), _ = timed("export (child process)", lambda: export(command))
                runs["export"].append(seconds)
                runs["export_cpu"].append(used)
                runs["rss"].append(rss)
                table = pq.read_table(shard / "data/chunk-000/file-000.parquet")
            else:
                before = cpu_seconds()
                _, seconds = timed("floor: copy + parquet write + SHA-256", partial(floor, camera, table, work))
                runs["floor_cpu"].append(cpu_seconds() - before)
                runs["floor"].append(seconds)
                with_options = partial(floor, camera, table, work, **export_options)
                _, seconds = timed("floor, the export's parquet options", with_options)
                runs["floor_options"].append(seconds)
    print(f"  {summary}")
    rows = table.num_rows
    export_seconds = statistics.median(runs["export"])
    print(f"  export (s)                   {spread(runs['export'])}")
    print(f"  floor (s)                    {spread(runs['floor'])}")
    ratios = [e / f for e, f in zip(runs["export"], runs["floor"], strict=True)]
    print(f"  export / floor               {spread(ratios)}")
    print(f"  floor, export's options (s)  {spread(runs['floor_options'])}")
    ratios = [e / f for e, f in zip(runs["export"], runs["floor_options"], strict=True)]
    print(f"  export / that floor          {spread(ratios)}")
    print(f"  export CPU (s, user + sys)   {spread(runs['export_cpu'])}")
    print(f"  floor CPU (s, user + sys)    {spread(runs['floor_cpu'])}")
    cpu_ratios = [e / f for e, f in zip(runs["export_cpu"], runs["floor_cpu"], strict=True)]
    print(f"  export / floor, CPU          {spread(cpu_ratios)}")
    print(f"  peak RSS of the export (MiB) {spread(runs['rss'])}")
    print(f"  seconds per recorded minute  {export_seconds / args.minutes:8.2f}")
    print(f"  rows per second              {rows / export_seconds:8.0f}")
    if args.retry_minutes <= 0:
        return 0

    print(f"capture with five retries: {args.retry_minutes:g} min, same camera")
    retried, _ = timed(
        "generate",
        lambda: generated(work / "retried", seconds=args.retry_minutes * 60, retries=5, seed=2),
    )
    camera = retried / "media/camera.mp4"
    manifest = json.loads((retried / "capture.json").read_text())
    probe = video.probe_camera(camera)
    slot_times = retained_slot_times(retried)
    first_frame = manifest["camera"]["first_frame_source_time"]
    _, smart_seconds = timed(
        "video: smart cut",
        lambda: video.export_video(camera, probe, first_frame, slot_times, False, RATE, work / "smart.mp4"),
    )
    full, full_seconds = timed(
        "video: full re-encode of the kept frames",
        lambda: video.export_video(
            camera, probe, first_frame, slot_times, False, RATE, work / "full.mp4", smart_cut=False
        ),
    )
    print(f"  {full.frame_count} frames; full re-encode {full.frame_count / full_seconds:.0f} frames/s")
    print(f"  smart cut copied {copied_frames(camera, work / 'smart.mp4')} of {full.frame_count} frames unchanged")
    print(f"  smart cut / full re-encode   {smart_seconds / full_seconds:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
