"""``ceres-pull`` that stops for good once ``CERES_PULL_STOP_AFTER`` files are in place, writing
``CERES_PULL_MARKER``: the test then SIGKILLs it there, for certain (no race with the download's speed)."""

import os
import sys
import threading
import time
from pathlib import Path

from ceres_pull import pull

stop_after = int(os.environ["CERES_PULL_STOP_AFTER"])
marker = Path(os.environ["CERES_PULL_MARKER"])
real, done, lock = pull.fetch_file, [], threading.Lock()


def fetch_file(*args, **kwargs):
    problem = real(*args, **kwargs)
    with lock:
        done.append(args[3]["path"])
        reached = len(done) >= stop_after
    if reached:
        staged = marker.with_name(marker.name + ".part")
        staged.write_text("\n".join(done))
        staged.rename(marker)  # whole, or not there
        time.sleep(3600)  # until killed
    return problem


pull.fetch_file = fetch_file
sys.exit(pull.main())
