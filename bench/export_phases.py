"""Where an export's time goes (prints figures; not a test).

    .venv/bin/python bench/export_phases.py CAPTURE_FOLDER [--work DIR]

Exports the capture in this process (as ``python -m exporter export`` does) with each phase wrapped by a
timer: wall seconds and CPU seconds of this process and its finished children (the journal's second
decoding process) while the phase ran. The video runs beside the data table: on a thread for a short
camera file, whose CPU is then counted in both phases, and in a forked process for a long one, whose
phases this process does not see (the time the data table's end waited for it is printed). The camera's
probe runs beside the journal, in a forked process too for a long camera file (the time the journal's end
waited for it is added to the same line); the receipt runs alone. A capture made
by ``bench/export.py --work DIR`` (``DIR/aligned``, or ``DIR/aligned-x6`` for an hour tiled from ten
minutes) can be given.
"""

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

started = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import exporter.forked as forked  # noqa: E402
import exporter.shard as shard  # noqa: E402
import exporter.source as source  # noqa: E402
import exporter.video as video  # noqa: E402

IMPORTS = time.perf_counter() - started


def cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


PHASES = [
    (video, "probe_camera", "camera probe (one pass over the packets)"),
    (source, "parse_journal", "journal (two processes from 16 MiB)"),
    (shard, "build_rows", "rows"),
    (shard, "_write_data", "data parquet and statistics"),
    (shard, "export_video", "video remux or encode (thread)"),
    (shard, "video_stats", "video statistics (thread)"),
    (forked.Job, "result", "waits for forked work (probe, video)"),
    (shard, "write_receipt", "receipt"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("capture", type=Path)
    parser.add_argument("--work", type=Path, help="folder for the shard (default: a temp folder)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {}
    for module, name, label in PHASES:
        function = getattr(module, name)

        def timed(*a, _function=function, _label=label, **k):
            wall, used = time.perf_counter(), cpu()
            try:
                return _function(*a, **k)
            finally:
                spent = times.setdefault(_label, [0.0, 0.0])
                spent[0] += time.perf_counter() - wall
                spent[1] += cpu() - used

        setattr(module, name, timed)
    out = (args.work or Path(tempfile.mkdtemp(prefix="ceres-phases-"))) / "shards"
    shutil.rmtree(out, ignore_errors=True)
    wall, used = time.perf_counter(), cpu()
    result = shard.export_shard(args.capture, out)
    wall, used = time.perf_counter() - wall, cpu() - used
    print(result.summary())
    print(f"  {'imports':<44} {IMPORTS:6.2f} s wall")
    for _, _, label in PHASES:
        if label in times:
            print(f"  {label:<44} {times[label][0]:6.2f} s wall {times[label][1]:6.2f} s CPU")
    print(f"  {'export in all (imports left out)':<44} {wall:6.2f} s wall {used:6.2f} s CPU")
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
