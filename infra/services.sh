#!/usr/bin/env bash
# Make sure the test suite's PostgreSQL and Redis are up on 127.0.0.1 (start them if not), wait until they
# answer, and create the `ceres` database. pytest-django creates `test_ceres` from it by itself.
# Prints the env lines the suite uses on stdout (progress goes to stderr):
#   set -a; eval "$(infra/services.sh)"; set +a
set -euo pipefail

pg_port=5432
redis_port=6379
database=ceres

log() { echo "services: $*" >&2; }
die() {
    echo "services: error: $*" >&2
    exit 1
}

wait_until() { # what command...
    local what=$1 _
    shift
    for _ in $(seq 150); do
        "$@" >/dev/null 2>&1 && return
        sleep 0.2
    done
    die "$what did not answer within 30 s"
}

pg_up() { pg_isready -q -h 127.0.0.1 -p "$pg_port"; }
redis_up() { [[ $(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null) == PONG ]]; }
psql_postgres() { psql -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -v ON_ERROR_STOP=1 -tAq "$@"; }

if ! pg_up; then
    version=$(find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
    [[ -n $version ]] || die "no PostgreSQL cluster under /etc/postgresql (install postgresql)"
    log "starting PostgreSQL $version/main"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
fi
wait_until "PostgreSQL on 127.0.0.1:$pg_port" pg_up

if ! redis_up; then
    log "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no >&2
fi
wait_until "Redis on 127.0.0.1:$redis_port" redis_up

# The suite connects as postgres without a password (trust auth on 127.0.0.1).
psql_postgres -c 'SELECT 1' >/dev/null ||
    die "cannot connect as postgres to 127.0.0.1:$pg_port without a password; allow trust auth for 127.0.0.1"
if [[ $(psql_postgres -c "SELECT 1 FROM pg_database WHERE datname = '$database'") != 1 ]]; then
    log "creating database $database"
    psql_postgres -c "CREATE DATABASE $database"
fi

cat <<ENV
DATABASE_URL=postgres://postgres@127.0.0.1:$pg_port/$database
CELERY_BROKER_URL=redis://127.0.0.1:$redis_port/0
ENV
