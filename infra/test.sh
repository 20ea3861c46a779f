#!/usr/bin/env bash
# Run the whole test suite against the real parts: PostgreSQL, Redis, the Swift S3 gateway and headless
# Chromium, then LeRobot's own reader on assembled shards. Installs what is missing (needs root for apt).
# Extra arguments go to pytest, e.g. `bash infra/test.sh tests/exporter -x`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash infra/venv.sh test
# A DATABASE_URL or CELERY_BROKER_URL given by the caller wins over the defaults the scripts print.
given_database=${DATABASE_URL:-}
given_broker=${CELERY_BROKER_URL:-}
services_env=$(bash infra/services.sh)
s3_env=$(bash infra/swift/start.sh)
browser_env=$(bash infra/browser.sh)
set -a
eval "$services_env"
eval "$s3_env"
eval "$browser_env"
set +a
export DATABASE_URL=${given_database:-$DATABASE_URL}
export CELERY_BROKER_URL=${given_broker:-$CELERY_BROKER_URL}
export CERES_STORAGE=s3
export CERES_TEST_OUTPUT=${CERES_TEST_OUTPUT:-$PWD/test-output}
# Every part is up here, so a skipped test means a broken environment: any skip not on the allow-list in
# tests/skip_policy.py fails the run (each is listed with its reason; -ra also prints every skip).
export CERES_FAIL_ON_SKIP=1
CERES_DATA_DIR=$(mktemp -d)
export CERES_DATA_DIR
trap 'rm -rf "$CERES_DATA_DIR"' EXIT

.venv/bin/ruff check .

run_pytest() {
    local status=0
    .venv/bin/pytest "$@" || status=$?
    if ((status == 5)); then
        echo "test: pytest collected no tests: that is a failure" >&2
        exit 1
    fi
    ((status == 0)) || exit "$status"
}

if (($# > 0)); then
    run_pytest --create-db "$@"  # what was asked for, in one process
else
    # LeRobot's own venv (built once per machine, mostly downloading and unpacking) is made while the suite runs.
    lerobot_log=$CERES_DATA_DIR/lerobot-prepare.log
    bash tests/compat/lerobot_check.sh --prepare >"$lerobot_log" 2>&1 &
    lerobot_prepare=$!
    # The whole suite, drills included, on two processes (CERES_TEST_PROCESSES): each has its own test database
    # and S3 buckets (tests/conftest.py). Then, alone, the tests that stop a service everyone shares.
    run_pytest --create-db -n "${CERES_TEST_PROCESSES:-2}" -m "not outage" --durations=25
    run_pytest --create-db -p no:xdist -m outage
    if ! wait "$lerobot_prepare"; then
        cat "$lerobot_log" >&2
        echo "test: building LeRobot's venv failed (above)" >&2
        exit 1
    fi
    # Beside its own datasets, LeRobot loads the one-dataset download the portal's tests pulled with ceres-pull.
    bash tests/compat/lerobot_check.sh --also "$CERES_TEST_OUTPUT/lerobot"
fi
