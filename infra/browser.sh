#!/usr/bin/env bash
# Make the browser tests runnable: Debian's Chromium (no Playwright browser download), the `playwright`
# package in the project's virtual environment, and a headless smoke launch with the flags the suite uses.
# Prints the env line the browser tests read on stdout (progress goes to stderr).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${CERES_PYTHON:-$repo/.venv/bin/python}
chromium=/usr/bin/chromium

log() { echo "browser: $*" >&2; }
die() {
    echo "browser: error: $*" >&2
    exit 1
}

if [[ ! -x $chromium ]]; then
    [[ $(id -u) == 0 ]] || die "$chromium is missing and installing it needs root"
    log "installing chromium"
    apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
    # fonts-liberation (a recommends we keep) gives pages metric-compatible Arial/Times in screenshots.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
        chromium fonts-liberation >&2
fi

[[ -x $python ]] || die "no Python at $python; create the virtual environment (pip install -e '.[test]')"
"$python" -c 'import playwright' 2>/dev/null ||
    die "the playwright package does not import in $python; pip install -e '.[test]'"

"$python" - "$chromium" <<'PY' >&2 || die "headless Chromium did not start under Playwright (see above)"
import sys

from playwright.sync_api import sync_playwright

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path=sys.argv[1], headless=True, args=ARGS)
    page = browser.new_page()
    page.set_content("<title>smoke</title><p id=probe>CERES</p>")
    text = page.text_content("#probe")
    if text != "CERES":
        sys.exit(f"page rendered {text!r} instead of 'CERES'")
    print(f"browser: Chromium {browser.version} launches headless under Playwright")
    browser.close()
PY

echo "CERES_CHROMIUM=$chromium"
