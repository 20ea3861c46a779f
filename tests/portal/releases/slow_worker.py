"""A Celery worker whose object uploads and copies each wait a moment first, so a test can stop the storage or kill the
worker in the middle of a release (waiting for a state, not for time). Run as ``python slow_worker.py``
with the worker's environment; ``CERES_TEST_PUT_DELAY`` is the wait in seconds."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

from portal.core import storage

DELAY = float(os.environ.get("CERES_TEST_PUT_DELAY", "0.4"))
_put, _copy = storage.put, storage.copy


def slow_put(*args, **kwargs):
    time.sleep(DELAY)
    return _put(*args, **kwargs)


def slow_copy(*args, **kwargs):
    time.sleep(DELAY)
    return _copy(*args, **kwargs)


storage.put, storage.copy = slow_put, slow_copy

if __name__ == "__main__":
    from celery.__main__ import main

    sys.argv = ["celery", "-A", "portal", "worker", "--pool", "solo", "--without-gossip", "--without-mingle",
                "--without-heartbeat", "-l", "INFO"]
    main()
