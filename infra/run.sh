#!/usr/bin/env bash
# Run the portal with demo data on the embedded defaults: SQLite, real Celery workers (one for the default
# queue, with beat, and one for the heavy queue: export, verification) on the filesystem broker, local storage folders in the data folder (CERES_DATA_DIR, default var/). No server needs
# to be running. Ctrl-C, or TERM to this script, stops the portal, then the workers and beat: each gets TERM,
# a bounded wait (CERES_STOP_SECONDS for the worker's warm shutdown, default 10), then KILL.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash infra/venv.sh
export CERES_DEBUG=${CERES_DEBUG:-1}
host=${CERES_HOST:-127.0.0.1}
port=${CERES_PORT:-8000}
data=${CERES_DATA_DIR:-var}
grace=${CERES_STOP_SECONDS:-10}
[[ $grace =~ ^[0-9]+$ ]] || { echo "run.sh: CERES_STOP_SECONDS must be a whole number of seconds" >&2; exit 2; }
py=.venv/bin/python

$py manage.py migrate --no-input -v 0
$py manage.py demo_setup
$py manage.py demo_recordings
# The researchers' client's wheel, served at /client/ (built again only when clients/ceres-pull changed).
$py manage.py client_wheel

# Each server runs in a session (and process group) of its own: a Ctrl-C reaches only this script, which
# stops them in order, and a KILL of the group also ends the worker's pool and beat processes.
web= worker= heavy=
stop_group() {  # leader pid, seconds to wait after TERM
    [[ -n $1 ]] || return 0
    kill -TERM "$1" 2>/dev/null || true
    # A deadline on the clock, not a count of naps: on a loaded machine each `sleep` takes longer than it asks.
    local deadline=$((${EPOCHREALTIME/./} + $2 * 1000000))
    while ((${EPOCHREALTIME/./} < deadline)) && kill -0 "$1" 2>/dev/null; do sleep 0.1; done
    kill -KILL -- "-$1" 2>/dev/null || true
}
stop() {
    trap '' INT TERM
    echo "Stopping the portal, the workers and beat" >&2
    stop_group "$web" 3
    stop_group "$worker" "$grace" &
    stop_group "$heavy" "$grace" &
    wait
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$data/log"
log=$data/log/celery.log
: >"$log"
warnings=
if [[ $(id -u) == 0 ]]; then
    # The worker runs as the user who started this script; Celery warns about root even though the worker
    # accepts JSON messages only (no pickle), which is what makes root dangerous for it.
    echo "run.sh: the worker runs as root because run.sh was started as root. It accepts JSON messages only," \
        "so Celery's superuser warning is silenced here; production runs it as its own user" \
        "(infra/production/ceres-worker.service)." >>"$log"
    warnings="ignore:You're running the worker with superuser privileges"
fi
# Local workers: no cluster gossip, start-up sync or heartbeats, which only slow their start and stop. One
# takes the default queue (ingest, inbox, purges) and runs beat; the other the heavy queue (export,
# verification), so an export never delays an ingest.
queue=${CERES_TASK_QUEUE:-ceres}
quiet=(--without-gossip --without-mingle --without-heartbeat --loglevel INFO --concurrency 1)
setsid env PYTHONWARNINGS="$warnings" .venv/bin/celery -A portal worker --beat --queues "$queue" \
    --hostname "default@%h" "${quiet[@]}" >>"$log" 2>&1 &
worker=$!
setsid env PYTHONWARNINGS="$warnings" .venv/bin/celery -A portal worker --queues "$queue-heavy" \
    --hostname "heavy@%h" "${quiet[@]}" >>"$log" 2>&1 &
heavy=$!
echo "Celery workers (default and heavy queues) and beat started (log: $log)"
setsid $py manage.py runserver "$host:$port" --noreload &
web=$!
echo "CERES Portal: http://$host:$port/  (Ctrl-C stops the server, the workers and beat)"
echo "A capture to upload as the coordinator: $py manage.py demo_capture"
status=0
wait -n "$web" "$worker" "$heavy" || status=$?
exit "$status"
