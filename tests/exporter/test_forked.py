"""Work in a forked process (exporter/forked.py): its result, its failure replaced by the work done here, and
its end with the process that forked it."""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from exporter import forked

pytestmark = pytest.mark.skipif(not forked.usable(), reason="needs fork and two cores")


def test_a_child_returns_its_result():
    child = forked.Child(lambda: {"pid": os.getpid(), "values": [1.5, None]})
    result = child.join()
    assert result["values"] == [1.5, None] and result["pid"] != os.getpid()
    child.stop()  # joined: nothing left to stop


def test_a_failed_child_gives_none():
    def failing():
        raise ValueError("in the child")

    assert forked.Child(failing).join() is None
    assert forked.Child(lambda: os._exit(3)).join() is None


def test_a_job_replaces_a_failed_process_after_cleaning(tmp_path: Path):
    """The forked try left a file and died; the job cleans, then does the work here."""
    parent = os.getpid()
    left = tmp_path / "left-by-the-child"

    def work():
        if os.getpid() != parent:
            left.write_text("half")
            os._exit(9)
        return "done here"

    job = forked.Job(work, fork=True, clean=lambda: left.unlink())
    assert job.result() == "done here"
    assert not left.exists()


def test_a_job_without_fork_runs_on_the_pool_or_when_asked():
    pid = os.getpid()
    assert forked.Job(os.getpid, fork=False).result() == pid
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert forked.Job(os.getpid, fork=False, pool=pool).result() == pid
    assert forked.Job(os.getpid, fork=True).result() != pid


def test_an_error_is_raised_here_with_its_message():
    def failing():
        raise ValueError("the camera does not decode")

    with pytest.raises(ValueError, match="the camera does not decode"):
        forked.Job(failing, fork=True).result()


def test_a_child_dies_with_the_process_that_forked_it(tmp_path: Path):
    """SIGKILL of the exporting process (as the drills kill a worker) takes its forked work with it."""
    script = (
        "import signal, sys; from exporter import forked; "
        "child = forked.Child(signal.pause); print(child.pid, flush=True); signal.pause()"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    stat = Path(f"/proc/{child}/stat")
    deadline = time.monotonic() + 10
    while stat.read_text().split(") ")[-1][:1] != "S" and time.monotonic() < deadline:
        time.sleep(0.01)  # until the child waits in its work
    assert stat.read_text().split(") ")[-1][:1] == "S"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if stat.read_text().split(") ")[-1][:1] == "Z":  # dead, waiting to be reaped by its new parent
                break
        except FileNotFoundError:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the forked process outlived the process that forked it")
