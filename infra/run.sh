#!/usr/bin/env bash
# Run the portal with demo data on the embedded defaults: SQLite, a real Celery worker (and beat) on the
# filesystem broker, local storage folders under var/. No server needs to be running. Ctrl-C stops all.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash infra/venv.sh
export CERES_DEBUG=${CERES_DEBUG:-1}
host=${CERES_HOST:-127.0.0.1}
port=${CERES_PORT:-8000}
py=.venv/bin/python

$py manage.py migrate --no-input -v 0
$py manage.py demo_setup
if $py manage.py help demo_recordings >/dev/null 2>&1; then
    $py manage.py demo_recordings
fi

mkdir -p var/log
.venv/bin/celery -A portal worker --beat --concurrency 2 --loglevel INFO \
    --schedule var/celerybeat-schedule >var/log/celery.log 2>&1 &
worker=$!
trap 'kill $worker 2>/dev/null; wait $worker 2>/dev/null' EXIT INT TERM
echo "Celery worker and beat started (log: var/log/celery.log)"
echo "CERES Portal: http://$host:$port/  (Ctrl-C stops the server and the worker)"
$py manage.py runserver "$host:$port" --noreload
