#!/usr/bin/env bash
# Start a single-replica OpenStack Swift with its S3 gateway (s3api) on 127.0.0.1 for the test suite.
#
#   infra/swift/start.sh               install if needed, configure, start all four servers, create buckets
#   infra/swift/start.sh --proxy-only  start only the proxy again (after `stop.sh --proxy-only`)
#
# Idempotent: servers that already run and answer are left alone. The S3 settings the tests need are printed
# on stdout as KEY=VALUE lines (progress goes to stderr), e.g.
#   set -a; eval "$(infra/swift/start.sh)"; set +a
#
# Environment: CERES_SWIFT_DIR (state folder, default ~/.local/state/ceres-portal/swift: one gateway per machine), CERES_S3_PORT (proxy, 8085),
# CERES_SWIFT_BACKEND_PORT (object server; container and account servers and the proxy's memcached take the next
# three; default 6210),
# CERES_PYTHON (a Python with boto3, default .venv/bin/python in the repo).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=infra/swift/common.sh
source "$here/common.sh"

proxy_only=false
case "${1:-}" in
    "") ;;
    --proxy-only) proxy_only=true ;;
    *) die "unknown argument '$1' (expected nothing or --proxy-only)" ;;
esac

python=${CERES_PYTHON:-$repo/.venv/bin/python}
buckets=(ceres-captures ceres-shards ceres-releases)
packages=(swift swift-proxy swift-account swift-container swift-object memcached)

install_packages() {
    local missing=() pkg
    for pkg in "${packages[@]}"; do
        if [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) != installed ]]; then
            missing+=("$pkg")
        fi
    done
    ((${#missing[@]} == 0)) && return
    [[ $(id -u) == 0 ]] || die "packages missing (${missing[*]}) and installing them needs root"
    log "installing ${missing[*]}"
    apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
        --no-install-recommends "${missing[@]}" >&2
}

check_hash_conf() {
    # The servers read the hash prefix/suffix and storage policies from /etc/swift/swift.conf only (Swift
    # has no option to move it); Debian's `swift` package ships one with a single default policy.
    grep -q '^\[swift-hash\]' /etc/swift/swift.conf 2>/dev/null ||
        die "/etc/swift/swift.conf has no [swift-hash] section; reinstall the 'swift' package"
}

check_xattr() {
    # Swift's own interpreter, which the packages guarantee.
    /usr/bin/python3 - "$devices/d1" <<'EOF' || die "$devices/d1 does not support user xattrs, which Swift's object server needs; set CERES_SWIFT_DIR to a folder on ext4 or xfs"
import os, sys
probe = os.path.join(sys.argv[1], ".xattr-probe")
open(probe, "wb").close()
try:
    os.setxattr(probe, "user.ceres.probe", b"1")
finally:
    os.unlink(probe)
EOF
}

write_server_conf() { # name port egg
    local name=$1 port=$2 egg=$3
    cat >"$etc/$name.conf.tmp" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $port
devices = $devices
mount_check = false
workers = 0
user = root
swift_dir = $etc
log_name = $name
log_level = WARNING

[pipeline:main]
pipeline = $name

[app:$name]
use = egg:swift#$egg
EOF
    mv "$etc/$name.conf.tmp" "$etc/$name.conf"
}

write_proxy_conf() {
    cat >"$etc/proxy-server.conf.tmp" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $s3_port
workers = 0
user = root
swift_dir = $etc
log_name = proxy-server
log_level = WARNING

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:s3api]
use = egg:swift#s3api
location = us-east-1

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$(server_port memcached)

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo
EOF
    mv "$etc/proxy-server.conf.tmp" "$etc/proxy-server.conf"
}

build_rings() {
    # One process through Swift's ring API: three swift-ring-builder runs per ring cost ~1.5 s each.
    /usr/bin/python3 - "$etc" "$(server_port object-server)" "$(server_port container-server)" \
        "$(server_port account-server)" <<'EOF'
import os
import sys

from swift.common.ring import RingBuilder

etc = sys.argv[1]
for kind, port in zip(("object", "container", "account"), sys.argv[2:], strict=True):
    ring_path = os.path.join(etc, f"{kind}.ring.gz")
    if os.path.exists(ring_path):
        continue
    # 2^8 partitions, 1 replica, partitions may move again after 1 hour.
    builder = RingBuilder(8, 1, 1)
    builder.add_dev({"region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port), "device": "d1", "weight": 100})
    builder.rebalance()
    builder.save(os.path.join(etc, f"{kind}.builder"))
    builder.get_ring().save(ring_path + ".tmp")
    os.replace(ring_path + ".tmp", ring_path)
EOF
}

start_server() { # name
    local name=$1
    if server_running "$name"; then
        return
    fi
    # A server just stopped may hold its port a moment longer (its last connections closing): wait for it.
    local _
    for _ in $(seq 100); do
        port_open "$(server_port "$name")" || break
        sleep 0.1
    done
    port_open "$(server_port "$name")" &&
        die "port $(server_port "$name") is taken by a process not started from $state; stop it first"
    # setsid: the servers outlive the shell (or pytest fixture) that started them.
    if [[ $name == memcached ]]; then
        # Only this gateway's proxy uses it (a private gateway has its own): 64 MB, no UDP, no persistence.
        setsid memcached -l 127.0.0.1 -p "$(server_port memcached)" -U 0 -m 64 -u "$(id -un)" \
            >>"$logs/$name.log" 2>&1 </dev/null 9>&- &
    else
        setsid "swift-$name" "$etc/$name.conf" >>"$logs/$name.log" 2>&1 </dev/null 9>&- &
    fi
    echo $! >"$run/$name.pid"
    log "started $name (pid $!)"
}

ensure_buckets() {
    [[ -x $python ]] || die "no Python at $python to create the buckets with boto3; set CERES_PYTHON"
    "$python" - "http://127.0.0.1:$s3_port" "${buckets[@]}" <<'EOF'
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint, *buckets = sys.argv[1:]
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="test:tester",
    aws_secret_access_key="testing",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 10, "mode": "standard"}),
)
for bucket in buckets:
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("404", "NoSuchBucket"):
            raise
        s3.create_bucket(Bucket=bucket)
        print(f"created bucket {bucket}", file=sys.stderr)
EOF
}

main() {
    mkdir -p "$state"
    exec 9>"$state/lock"
    flock 9

    if $proxy_only; then
        [[ -f $etc/proxy-server.conf && -f $etc/object.ring.gz ]] ||
            die "no gateway configured under $state; run infra/swift/start.sh without --proxy-only first"
        start_server proxy-server
        wait_until_up proxy-server
    else
        install_packages
        check_hash_conf
        mkdir -p "$etc" "$devices/d1" "$run" "$logs"
        check_xattr
        local all_up=true name
        for name in "${servers[@]}"; do
            server_running "$name" || all_up=false
        done
        if $all_up && proxy_healthy; then
            log "gateway already running on 127.0.0.1:$s3_port"
        else
            write_server_conf object-server "$(server_port object-server)" object
            write_server_conf container-server "$(server_port container-server)" container
            write_server_conf account-server "$(server_port account-server)" account
            write_proxy_conf
            build_rings
            for name in "${servers[@]}"; do
                start_server "$name"
            done
            for name in "${servers[@]}"; do
                wait_until_up "$name"
            done
        fi
        ensure_buckets
    fi

    cat <<EOF
CERES_S3_ENDPOINT_URL=http://127.0.0.1:$s3_port
CERES_S3_ACCESS_KEY_ID=test:tester
CERES_S3_SECRET_ACCESS_KEY=testing
CERES_S3_REGION=us-east-1
CERES_S3_BUCKET_CAPTURES=${buckets[0]}
CERES_S3_BUCKET_SHARDS=${buckets[1]}
CERES_S3_BUCKET_RELEASES=${buckets[2]}
EOF
}

main
