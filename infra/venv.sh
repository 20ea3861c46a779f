#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv and install the project into it.
#   infra/venv.sh          runtime dependencies
#   infra/venv.sh test     plus the test extra
# The researchers' client (clients/ceres-pull, a distribution of its own that the portal depends on) is installed
# first, editable, so that pip finds the portal's pinned ceres-pull installed and never looks for it on an index.
# Re-installs only when pyproject.toml or the client's changed since the last successful install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

extra=${1:-}
python=${CERES_BOOTSTRAP_PYTHON:-}
if [[ -z $python ]]; then
    for candidate in python3.11 python3.12 python3; do
        if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info < (3, 13)))'; then
            python=$candidate
            break
        fi
    done
fi
[[ -n $python ]] || { echo "venv: error: Python 3.11 or 3.12 is needed" >&2; exit 1; }

if [[ ! -x .venv/bin/python ]]; then
    echo "venv: creating .venv with $($python --version)" >&2
    "$python" -m venv .venv
fi
stamp=".venv/.installed${extra:+-$extra}"
# setup.py and the C sources: the journal's block parser and the statistics' compiled part are compiled by the
# install (a stale one would be used)
installed() {
    [[ -f $1 && ! pyproject.toml -nt $1 && ! clients/ceres-pull/pyproject.toml -nt $1 && ! setup.py -nt $1 \
        && ! exporter/_journal_block.c -nt $1 && ! exporter/_block_stats.c -nt $1 ]]
}
# The test extra holds every runtime dependency, so its stamp also stands for a runtime install.
if ! installed "$stamp" && ! { [[ -z $extra ]] && installed .venv/.installed-test; }; then
    echo "venv: installing the project${extra:+ with [$extra]}" >&2
    .venv/bin/python -m pip install -q --upgrade pip >&2
    .venv/bin/python -m pip install -q -e clients/ceres-pull >&2
    .venv/bin/python -m pip install -q -e ".${extra:+[$extra]}" >&2
    touch "$stamp"
fi
