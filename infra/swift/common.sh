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

# Whether the process in run/<name>.pid is alive at all (not a zombie), whatever its command line says yet. Just
# after `setsid ... &` the forked shell has not exec'd the server: its command line is still the script's own, so
# server_pid does not know it yet, but it has not died either.
pid_alive() { # name
    local name=$1 pid stat
    [[ -f $run/$name.pid ]] || return 1
    pid=$(<"$run/$name.pid")
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    # The third field of /proc/<pid>/stat (after the parenthesised name) is the state: Z zombie, X dead.
    stat=${stat##*) }
    [[ ${stat:0:1} != [ZX] ]]
}

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

# Wait until the server started last answers (30 s at most); its log is named if it dies first.
wait_until_up() { # name
    local name=$1 _
    for _ in $(seq 300); do  # 30 s: the proxy takes 2 s idle, several times that on a busy machine
        if ! server_running "$name"; then
            # Not (yet) the server: a process still on its way to exec'ing it is waited for; a dead one is an error.
            pid_alive "$name" || die "$name exited; see $logs/$name.log"
            sleep 0.1
            continue
        fi
        if [[ $name == proxy-server ]]; then
            proxy_healthy && return
        else
            port_open "$(server_port "$name")" && return
        fi
        sleep 0.1
    done
    die "$name did not answer within 30 s; see $logs/$name.log"
}
