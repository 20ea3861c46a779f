"""`bash infra/run.sh` stops the portal, the Celery workers and beat within a bounded time on Ctrl-C or TERM.

Each run starts the script on a temporary data folder and a free port, waits until the portal answers and the
worker is ready, signals the script as a terminal (SIGINT to its process group), a user (TERM to the script)
or a service manager (TERM to the whole group) would, and checks that every process it started is gone.
The worker used to hang in "Warm shutdown" for minutes after its process group got TERM, and TERM to the
script alone did nothing while the portal ran in the foreground. A last run hangs both workers, so the script
has to wait out its grace period and KILL them.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RUN_SH = (REPO / "infra" / "run.sh").read_text()
# run.sh's bound, read from the script: TERM to the portal and up to this long for it to go, then TERM to both
# workers at once and up to CERES_STOP_SECONDS (its default) for their warm shutdown, then KILL of every session.
PORTAL_GRACE_S = int(re.search(r'stop_group "\$web" (\d+)', RUN_SH)[1])
WORKER_GRACE_S = int(re.search(r"CERES_STOP_SECONDS:-(\d+)", RUN_SH)[1])
MARGIN_S = 12  # a loaded 2-core machine: the KILL itself, reaping, the script's own exit
STOP_BOUND_S = PORTAL_GRACE_S + WORKER_GRACE_S + MARGIN_S
START_BOUND_S = 180


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process, from /proc."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
        table[int(stat.parent.name)] = (int(fields[1]), fields[0])
    return table


def descendants(pid: int) -> dict[int, str]:
    """The running descendants of ``pid`` and their command lines."""
    table = process_table()
    found, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, state) in table.items():
            if ppid == parent and child not in found and state != "Z":
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                frontier.append(child)
    return found


def running(pid: int) -> bool:
    """Exists and is not a zombie (an exited process whose reaper, in a container, may never come)."""
    state = process_table().get(pid)
    return state is not None and state[1] != "Z"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s: {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """One data folder for every run, so only the first one migrates a new database."""
    return tmp_path_factory.mktemp("run-script") / "data"


def start(data_dir: Path, port: int, output: Path) -> subprocess.Popen:
    env = {
        "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
        "CERES_DATA_DIR": str(data_dir), "CERES_PORT": str(port),
    }
    with output.open("wb") as log:
        # A session of its own, like a shell's foreground job: SIGINT to its group is what Ctrl-C sends.
        return subprocess.Popen(["bash", "infra/run.sh"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_as_a_terminal_job)


def _as_a_terminal_job() -> None:
    """A shell starts a foreground job with the default dispositions: a test run started in the background (whose
    shell ignores SIGINT and SIGQUIT for it) or under nohup would pass its ignored signals on, and bash cannot
    trap a signal ignored at its start, so run.sh would never see the Ctrl-C this test sends."""
    for number in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


SIGNALS = {
    "ctrl-c": (lambda pid: os.killpg(pid, signal.SIGINT), 130),
    "term-to-script": (lambda pid: os.kill(pid, signal.SIGTERM), 143),
    "term-to-group": (lambda pid: os.killpg(pid, signal.SIGTERM), 143),
}


def start_and_wait_until_ready(data_dir: Path, port: int, output: Path) -> tuple[subprocess.Popen, dict[int, str]]:
    """run.sh started, the portal answering and both workers ready; returns the script and its processes."""
    script = start(data_dir, port, output)
    log = data_dir / "log" / "celery.log"
    wait_until(lambda: answers(port) or script.poll() is not None, START_BOUND_S, "the portal answers")
    assert script.poll() is None, output.read_text()
    wait_until(lambda: log.exists() and log.read_text().count(" ready.") >= 2, 60, "both workers are ready")
    children = descendants(script.pid)
    assert sum("runserver" in cmd for cmd in children.values()) == 1, children
    # the default queue's worker, its pool process and beat; the heavy queue's worker and its pool process
    assert sum("celery -A portal worker" in cmd for cmd in children.values()) >= 5, children
    return script, children


def stop_and_wait_until_gone(script: subprocess.Popen, children: dict[int, str], send, exit_code: int) -> None:
    """Signal the script; it exits with ``exit_code`` and every process it started is gone within its bound."""
    send(script.pid)
    stopped = time.monotonic()
    try:
        status = script.wait(timeout=STOP_BOUND_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"run.sh did not stop within {STOP_BOUND_S} s: {_state_of(script.pid)}") from None
    assert status == exit_code
    wait_until(lambda: not any(running(pid) for pid in children), STOP_BOUND_S - (time.monotonic() - stopped),
               f"every process of run.sh is gone: {[cmd for pid, cmd in children.items() if running(pid)]}")


def _state_of(pid: int) -> str:
    """What a script that does not stop is doing: its state, signal masks, what it waits in, what it runs."""
    lines = []
    for process, command in {pid: "run.sh", **descendants(pid)}.items():
        try:
            status = Path(f"/proc/{process}/status").read_text().splitlines()
            wchan = Path(f"/proc/{process}/wchan").read_text()
        except OSError:
            continue
        fields = [line for line in status if line.startswith(("State", "SigBlk", "SigIgn", "SigCgt", "PPid"))]
        lines.append(f"{process} {command[:120]!r} wchan={wchan} {' '.join(fields)}")
    return "\n".join(lines)


def kill_leftovers(script: subprocess.Popen, children: dict[int, str]) -> None:
    for pid in [script.pid, *children]:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", list(SIGNALS))
def test_a_signal_stops_the_portal_worker_and_beat(data_dir, tmp_path, how):
    send, exit_code = SIGNALS[how]
    port = free_port()
    output = tmp_path / "run.out"
    log = data_dir / "log" / "celery.log"
    script, children = None, {}
    try:
        script, children = start_and_wait_until_ready(data_dir, port, output)
        stop_and_wait_until_gone(script, children, send, exit_code)
        assert not answers(port)
    finally:
        if script is not None:
            kill_leftovers(script, children)

    printed = output.read_text()
    assert "coordinator  ceres-demo-coordinator" in printed, "run.sh prints the demo logins"
    worker_log = log.read_text()
    for noise in ("No hostname was supplied", "superuser privileges", "SecurityWarning"):
        assert noise not in printed + worker_log
    if os.geteuid() == 0:
        assert worker_log.count("the worker runs as root because run.sh was started as root") == 1


def test_workers_that_ignore_term_are_killed_within_the_bound(data_dir, tmp_path):
    """Both workers hang when the script gets TERM (like a worker whose warm shutdown waits for a long task):
    each is stopped with SIGSTOP, which leaves the TERM pending; only KILL ends a stopped process. run.sh waits
    its grace period for them and then KILLs their sessions, so their being gone shows the escalation, and
    everything is gone within the bound (PORTAL_GRACE_S + WORKER_GRACE_S + MARGIN_S)."""
    port = free_port()
    output = tmp_path / "run.out"
    log = data_dir / "log" / "celery.log"
    script, children = None, {}
    try:
        script, children = start_and_wait_until_ready(data_dir, port, output)
        table = process_table()
        celery = {pid for pid, cmd in children.items() if "celery -A portal worker" in cmd}
        workers = sorted(pid for pid in celery if table[pid][0] not in celery)  # not a pool or beat process
        assert len(workers) == 2, {pid: children[pid] for pid in celery}
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: all(process_table()[pid][1] == "T" for pid in workers), 10, "both workers stopped")
        log_before = log.read_text()

        stop_and_wait_until_gone(script, children, lambda pid: os.kill(pid, signal.SIGTERM), 143)
        assert not answers(port)
    finally:
        if script is not None:
            kill_leftovers(script, children)

    assert "Stopping the portal, the workers and beat" in output.read_text()
    assert "Warm shutdown" not in log.read_text()[len(log_before):], "the hung workers never handled the TERM"


WITHDRAW = """
from django.utils import timezone
from django_scopes import scope
from portal.recordings.demo import demo_registry
from portal.studies.models import ConsentEvent, Study
from portal.research.services.withdrawals import withdraw_consent
with scope(study=Study.objects.get(code="demo")):
    withdrawal = ConsentEvent.objects.filter(kind=ConsentEvent.Kind.WITHDRAWN).first()
    if withdrawal is None:
        demo = demo_registry()
        withdrawal = withdraw_consent(demo.coordinator, demo.demonstrator, withdrawal_date=timezone.localdate(),
                                      reason="left the demo")
    print(f"demonstrator {withdrawal.demonstrator.designator} withdrew consent on {withdrawal.event_date}")
"""


def test_the_demo_starts_again_after_its_demonstrator_withdrew(data_dir, tmp_path):
    """The demo demonstrator withdraws (as anyone trying the demo may do on their page); run.sh still seeds,
    says what it skipped, and starts. It used to stop in demo_recordings: "the consent date ... is not after
    the withdrawal"."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
           "CERES_DATA_DIR": str(data_dir), "CERES_DEBUG": "1"}
    python = str(REPO / ".venv" / "bin" / "python")
    for command in (["migrate", "--no-input", "-v", "0"], ["demo_setup"]):
        subprocess.run([python, "manage.py", *command], cwd=REPO, env=env, check=True, capture_output=True)
    withdrawn = subprocess.run([python, "manage.py", "shell", "-c", WITHDRAW], cwd=REPO, env=env, check=True,
                               capture_output=True, text=True).stdout.strip().splitlines()[-1]
    assert withdrawn.startswith("demonstrator ") and " withdrew consent on " in withdrawn

    port = free_port()
    output = tmp_path / "run.out"
    script, children = None, {}
    try:
        script, children = start_and_wait_until_ready(data_dir, port, output)
        stop_and_wait_until_gone(script, children, SIGNALS["ctrl-c"][0], SIGNALS["ctrl-c"][1])
    finally:
        if script is not None:
            kill_leftovers(script, children)
    printed = output.read_text()
    assert f"The demo {withdrawn}: recordings not ingested yet are skipped" in printed
    assert "not after the withdrawal" not in printed and "Traceback" not in printed
