"""The gateway scripts' wait for a server they started (infra/swift/common.sh): a server still on its way to
exec'ing is waited for, a server that died is named. No gateway is started here: a stand-in process plays the
server, under a state folder of the test's own."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(tmp_path: Path, server: str) -> subprocess.CompletedProcess:
    """Start ``server`` (a shell script, run in the background as start.sh runs the object server) and wait for
    it with the scripts' own wait_until_up. ``{port}`` and ``{marker}`` in it are the server's port and config
    file (what a running server's command line names)."""
    port = _free_port()
    state = tmp_path / "swift"
    stand_in = tmp_path / "stand-in.sh"
    stand_in.write_text(server.format(port=port, marker=state / "etc" / "object-server.conf"))
    script = f"""
set -euo pipefail
source "{REPO}/infra/swift/common.sh"
mkdir -p "$run" "$logs" "$etc"
setsid bash "{stand_in}" >>"$logs/object-server.log" 2>&1 </dev/null &
echo $! >"$run/object-server.pid"
wait_until_up object-server
echo "up: $(server_pid object-server)"
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CERES_SWIFT_DIR": str(state),
           "CERES_SWIFT_BACKEND_PORT": str(port)}
    try:
        return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["pkill", "-f", str(state)], check=False)


# Sleeps a while as a plain shell (its command line is not yet the server's), then execs a listener whose
# command line names the config file, as swift-object-server's does.
LATE_EXEC = """sleep 1.5
exec python3 -c '
import socket, time
s = socket.socket()
s.bind(("127.0.0.1", {port}))
s.listen()
time.sleep(30)
' "{marker}"
"""


def test_a_server_that_has_not_exec_d_yet_is_waited_for(tmp_path: Path) -> None:
    result = _wait_for(tmp_path, LATE_EXEC)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("up: "), result.stdout


def test_a_server_that_died_is_named_with_its_log(tmp_path: Path) -> None:
    result = _wait_for(tmp_path, "echo cannot bind >&2\nexit 1\n")
    assert result.returncode == 1
    assert "swift: error: object-server exited; see " in result.stderr
    assert result.stderr.strip().endswith("object-server.log")
