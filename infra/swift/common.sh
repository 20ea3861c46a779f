# Shared by start.sh and stop.sh: where the gateway's state lives and how to tell a server is ours and alive.
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# One gateway per machine by default, so its state is per machine too, outside any clone. A second, private
# gateway (for a test run that stops it on purpose beside another that needs it) takes its own state folder,
# its own S3 port and its own three backend ports: CERES_SWIFT_DIR, CERES_S3_PORT, CERES_SWIFT_BACKEND_PORT.
state=${CERES_SWIFT_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/ceres-portal/swift}
s3_port=${CERES_S3_PORT:-8085}
backend_port=${CERES_SWIFT_BACKEND_PORT:-6210}
etc=$state/etc
devices=$state/srv
run=$state/run
logs=$state/log
# memcached first: without it the proxy asks the account and container servers about the account and bucket
# before every object request (two extra backend requests each, and an error line per request in its log).
servers=(memcached object-server container-server account-server proxy-server)

log() { echo "swift: $*" >&2; }
die() {
    echo "swift: error: $*" >&2
    exit 1
}

# The pid in run/<name>.pid, if that process is alive and is the server started with our config file.
server_pid() { # name
    local name=$1 pid
    [[ -f $run/$name.pid ]] || return 1
    pid=$(<"$run/$name.pid")
    [[ -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(server_marker "$name")" || return 1
    echo "$pid"
}

server_running() { server_pid "$1" >/dev/null; }

# What in a server's command line says it is ours: its config file, or for memcached its port.
server_marker() { # name
    case $1 in
        memcached) echo "-p $(server_port memcached) " ;;
        *) echo "$etc/$1.conf" ;;
    esac
}

server_port() { # name
    case $1 in
        object-server) echo "$backend_port" ;;
        container-server) echo $((backend_port + 1)) ;;
        account-server) echo $((backend_port + 2)) ;;
        memcached) echo $((backend_port + 3)) ;;
        proxy-server) echo "$s3_port" ;;
    esac
}

port_open() { # port
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

proxy_healthy() {
    [[ $(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$s3_port/healthcheck") == 200 ]]
}
