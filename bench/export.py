"""Export benchmark (prints figures; not a test).

    .venv/bin/python bench/export.py [--minutes 10] [--retry-minutes 1] [--work DIR]

A capture already generated in ``--work`` (by an earlier run with the same arguments) is reused.

1. Generates an aligned 30 Hz capture with a 1280x720 H.264 camera and exports it with
   ``python -m exporter export`` in a child process (so its peak RSS can be read with
   RUSAGE_CHILDREN).
2. Measures the floor for the same capture: PyAV stream copy of the camera file, a pyarrow write of the
   exported data table (read before the clock starts), and SHA-256 of those outputs.
3. Generates a capture with five retries and times its video export: smart cut (copy untouched GOPs,
   re-encode the cut ones) against a full re-encode of the kept frames.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from exporter import video
from exporter.generate import generate_capture

RATE = 30
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


def floor(camera: Path, table: pa.Table, work: Path) -> None:
    stream_copy(camera, work / "floor.mp4")
    pq.write_table(table, work / "floor.parquet")
    for path in (work / "floor.mp4", work / "floor.parquet"):
        sha256(path)


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


def generated(out_dir: Path, **options) -> Path:
    """The capture in `out_dir`, generated unless an earlier run left it there."""
    if (out_dir / "capture.json").is_file():
        print(f"  reusing {out_dir}")
        return out_dir
    return generate_capture(out_dir, rate_hz=RATE, width=WIDTH, height=HEIGHT, **options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the aligned capture")
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
    shutil.rmtree(work / "shards", ignore_errors=True)
    command = [sys.executable, "-m", "exporter", "export", str(source), str(work / "shards")]
    completed, export_seconds = timed(
        "export (child process)",
        lambda: subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]),
    )
    if completed.returncode:
        print(completed.stderr, file=sys.stderr)
        return 1
    peak_rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"  {completed.stdout.strip()}")
    shard = work / "shards" / "episode-000000"
    rows = pq.read_metadata(shard / "data/chunk-000/file-000.parquet").num_rows
    table = pq.read_table(shard / "data/chunk-000/file-000.parquet")
    _, floor_seconds = timed(
        "floor: stream copy + parquet write + SHA-256",
        lambda: floor(source / "media/camera.mp4", table, work),
    )
    print(f"  seconds per recorded minute  {export_seconds / args.minutes:8.2f}")
    print(f"  rows per second              {rows / export_seconds:8.0f}")
    print(f"  peak RSS of the export       {peak_rss_mib:8.0f} MiB")
    print(f"  export / floor               {export_seconds / floor_seconds:8.1f}")

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
