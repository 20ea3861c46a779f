#!/usr/bin/env bash
# Stop the Swift servers started by start.sh (all four, or with --proxy-only just the proxy, so a test can take
# the S3 gateway away mid-operation and bring it back with `start.sh --proxy-only`). State and data are kept.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=infra/swift/common.sh
source "$here/common.sh"

case "${1:-}" in
    "") targets=("${servers[@]}") ;;
    --proxy-only) targets=(proxy-server) ;;
    *) die "unknown argument '$1' (expected nothing or --proxy-only)" ;;
esac

stop_server() { # name
    local name=$1 pid _
    if ! pid=$(server_pid "$name"); then
        rm -f "$run/$name.pid"
        return
    fi
    kill -TERM "$pid"
    # server_pid rather than /proc/$pid: an exited server may linger as a zombie if pid 1 does not reap it.
    for _ in $(seq 50); do
        server_running "$name" || break
        sleep 0.1
    done
    if server_running "$name"; then
        log "$name (pid $pid) ignored SIGTERM for 5 s; killing it"
        kill -KILL "$pid"
    fi
    rm -f "$run/$name.pid"
    log "stopped $name"
}

[[ -d $state ]] || exit 0
exec 9>"$state/lock"
flock 9
for name in "${targets[@]}"; do
    stop_server "$name"
done
