"""``celery`` for the test workers, with an optional pause in the shard upload (a barrier the test controls).

With ``CERES_TEST_PAUSE_BEFORE`` (the end of a shard object's name) and ``CERES_TEST_BARRIER`` (a folder), the
worker stops just before storing that object: it writes ``paused`` (holding the name) into the folder and
waits until the test writes ``go``. So a test acts on a state (the upload is under way, these objects are
stored, that one is not) instead of racing the export's speed. Without them this is plain ``celery``.

Usage (from ``pipeline_worker.Worker``): python tests/portal/recordings/worker_main.py -A portal worker ...
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def pause_before(suffix: str, barrier: Path) -> None:
    from portal.core import storage

    store = storage.put

    def put(target, name, content):
        if name.endswith(suffix) and not (barrier / "go").exists():
            (barrier / "paused").write_text(name)
            while not (barrier / "go").exists():
                time.sleep(0.02)
        return store(target, name, content)

    storage.put = put


if __name__ == "__main__":
    sys.path[0] = str(REPO)  # the project, not this script's folder
    if os.environ.get("CERES_TEST_PAUSE_BEFORE"):
        pause_before(os.environ["CERES_TEST_PAUSE_BEFORE"], Path(os.environ["CERES_TEST_BARRIER"]))
    from celery.__main__ import main

    sys.argv[0] = "celery"
    sys.exit(main())
