#!/usr/bin/env bash
# LeRobot compatibility check: builds small study datasets with the exporter (generate -> export ->
# assemble: three episodes with a camera, the same with episode 1 left out, two without a camera, and one
# whose video is redacted) and
# loads them with Hugging Face LeRobot 0.6.1's own reader, offline, decoding every frame. Every frame's
# task, slot, observation.state and action are compared, value by value, with what expectations.py reads
# from the capture journals without the exporter; its pixels with the shard's own mp4.
#
# LeRobot 0.6.1 needs Python 3.12 and pins av<16 and torch<2.12, so it cannot live in the app's venv: it
# gets its own venv in a per-machine cache outside the clone, built once (about 5.4 GB, 80 s).
#
# Usage: bash tests/compat/lerobot_check.sh [--prepare] [--app-python PATH] [--also DIR]
#   --prepare          only build the LeRobot venv (if missing) and exit
#   --app-python PATH  python of the app's venv (default: .venv/bin/python of this clone)
#   --also DIR         also load every DIR/<name>/dataset against DIR/<name>/expected.json: datasets the portal's
#                      tests made (a one-dataset download pulled with ceres-pull); DIR must hold at least one
# Environment: CERES_CACHE_DIR (cache root), CERES_PYTHON312 (a Python 3.12 interpreter to use),
#   CERES_KEEP_WORK=1 keeps the generated datasets and prints where they are.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
app_python="$repo/.venv/bin/python"
prepare_only=0
also=
while [[ $# -gt 0 ]]; do
    case "$1" in
        --prepare) prepare_only=1; shift ;;
        --app-python) app_python="$2"; shift 2 ;;
        --also) also="$2"; shift 2 ;;
        *) echo "lerobot_check: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

lerobot_spec="lerobot[dataset]==0.6.1"
cache="${CERES_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ceres-portal}/lerobot-0.6.1"
venv="$cache/venv"
marker="$cache/installed"

venv_ready() { [[ -f "$marker" && -x "$venv/bin/python" ]]; }

is_python312() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; }

find_python312() {
    local candidate version
    if [[ -n "${CERES_PYTHON312:-}" ]]; then
        is_python312 "$CERES_PYTHON312" && echo "$CERES_PYTHON312"
        return
    fi
    if is_python312 python3.12; then
        command -v python3.12; return 0
    fi
    # A pyenv shim may exist while 3.12 is not the selected version: ask pyenv for an installed 3.12.
    if command -v pyenv >/dev/null 2>&1; then
        version=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$' | tail -n 1 || true)
        candidate="$(pyenv root)/versions/$version/bin/python3.12"
        if [[ -n "$version" ]] && is_python312 "$candidate"; then
            echo "$candidate"; return 0
        fi
    fi
    return 1
}

build_venv() {
    mkdir -p "$cache"
    # One build at a time per machine; a second caller waits and then finds the marker.
    exec 9>"$cache/.lock"
    flock 9
    if venv_ready; then
        exec 9>&-
        return 0
    fi
    local python312
    if ! python312=$(find_python312); then
        echo "lerobot_check: Python 3.12 not found (LeRobot 0.6.1 needs it). Install it (e.g. pyenv install 3.12)" \
             "or set CERES_PYTHON312 to its interpreter." >&2
        exit 3
    fi
    echo "lerobot_check: building the LeRobot venv in $venv with $python312 (once per machine)" >&2
    rm -rf "$venv"
    "$python312" -m venv "$venv"
    "$venv/bin/pip" install --quiet "$lerobot_spec"
    "$venv/bin/python" -c 'import lerobot.datasets.lerobot_dataset'
    # The marker is written last, so an interrupted install is redone on the next run.
    "$venv/bin/pip" freeze >"$marker.tmp"
    mv "$marker.tmp" "$marker"
    exec 9>&-
}

venv_ready || build_venv
if [[ $prepare_only == 1 ]]; then
    echo "lerobot_check: LeRobot venv ready at $venv"
    exit 0
fi

if [[ ! -x "$app_python" ]]; then
    echo "lerobot_check: app python $app_python not found (create the app venv or pass --app-python)" >&2
    exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ceres-lerobot-check.XXXXXX")
if [[ "${CERES_KEEP_WORK:-0}" == 1 ]]; then
    echo "lerobot_check: keeping the work folder $work" >&2
else
    trap 'rm -rf "$work"' EXIT
fi
exporter() { (cd "$repo" && "$app_python" -m exporter "$@"); }
total_frames() { "$app_python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["total_frames"])' "$1"; }

# export_study STUDY CAMERA RETRIES...: one 2-second capture per RETRIES value (different seeds, so
# different task texts), exported as episodes 0, 1, ... of STUDY with chained --from-index and --tasks.
export_study() {
    local study=$1 camera=$2 episode=0 from_index=0 retries capture shard
    local tasks_args=()
    shift 2
    for retries in "$@"; do
        capture="$work/$study/captures/capture-$episode"
        exporter generate "$capture" --seconds 2 --seed $((episode + 11)) --camera "$camera" \
            --width $width --height $height --retries "$retries" >>"$work/export.log"
        exporter export "$capture" "$work/$study/shards" --episode-index $episode --from-index $from_index \
            "${tasks_args[@]}" >>"$work/export.log"
        shard="$work/$study/shards/$(printf 'episode-%06d' $episode)"
        from_index=$((from_index + $(total_frames "$shard/meta/info.json")))
        tasks_args=(--tasks "$shard/meta/tasks.parquet")
        episode=$((episode + 1))
    done
}

# assemble_study STUDY DATASET CAMERA EPISODE...: assemble those episodes of STUDY and write what
# LeRobot must read back, from the capture journals and the shards' own mp4s.
checks=()
assemble_study() {
    local study=$1 dataset=$2 camera=$3 episode
    local captures=() shards=()
    shift 3
    for episode in "$@"; do
        captures+=("$work/$study/captures/capture-$episode")
        shards+=("$work/$study/shards/$(printf 'episode-%06d' "$episode")")
    done
    exporter assemble "$work/datasets/$dataset" "${shards[@]}" >>"$work/export.log"
    "$app_python" "$repo/tests/compat/expectations.py" --camera "$camera" "${captures[@]}" \
        --shards "${shards[@]}" >"$work/$dataset.json"
    checks+=("$work/datasets/$dataset" "$work/$dataset.json")
}

# A 160x120 camera on every episode; the middle one has a retry, so its video is range-aware.
width=160 height=120
export_study camera mp4 0 1 0
assemble_study camera all ${width}x${height} 0 1 2
assemble_study camera without-1 ${width}x${height} 0 2
export_study no-camera none 0 0
# A 5-second episode (GOPs of 2 s) with its video redacted: boxes on its first and last ten frames, so
# the smart cut re-encodes the first and last GOP and copies the middle one. The derived shard assembles
# and loads like any other, every frame decoded to the redacted mp4's pixels.
exporter generate "$work/redacted/capture-0" --seconds 5 --seed 21 --camera mp4 --width $width --height $height \
    --retries 0 >>"$work/export.log"
exporter export "$work/redacted/capture-0" "$work/redacted/shards" >>"$work/export.log"
"$app_python" -c 'import json, sys; n = int(sys.argv[1]); json.dump({str(f): [[20, 20, 70, 60]] for f in
    [*range(0, 10), *range(n - 10, n)]}, open(sys.argv[2], "w"))' \
    "$(total_frames "$work/redacted/shards/episode-000000/meta/info.json")" "$work/boxes.json"
exporter redact "$work/redacted/shards/episode-000000" "$work/redacted/derived" --boxes "$work/boxes.json" \
    >>"$work/export.log"
exporter assemble "$work/datasets/redacted" "$work/redacted/derived" >>"$work/export.log"
"$app_python" "$repo/tests/compat/expectations.py" --camera ${width}x${height} "$work/redacted/capture-0" \
    --shards "$work/redacted/derived" >"$work/redacted.json"
checks+=("$work/datasets/redacted" "$work/redacted.json")
assemble_study no-camera no-camera none 0 1

if [[ -n $also ]]; then
    found=0
    for made in "$also"/*/; do
        if [[ -d $made/dataset && -f $made/expected.json ]]; then
            checks+=("${made%/}/dataset" "${made%/}/expected.json")
            found=$((found + 1))
        fi
    done
    if ((found == 0)); then
        echo "lerobot_check: --also $also holds no <name>/dataset with its expected.json: the portal's tests did" \
            "not leave the datasets they pulled" >&2
        exit 1
    fi
fi

# Offline, with every Hugging Face cache in the work folder: a missing or inconsistent file must fail
# here instead of turning into a Hub download or polluting the user's cache.
if ! HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$work/hf/home" HF_DATASETS_CACHE="$work/hf/datasets" \
    HF_LEROBOT_HOME="$work/hf/lerobot" "$venv/bin/python" "$repo/tests/compat/lerobot_load.py" "${checks[@]}" \
    >"$work/lerobot.log" 2>&1; then
    cat "$work/lerobot.log" >&2
    echo "lerobot_check: FAILED: LeRobot $lerobot_spec did not load the assembled datasets as expected" >&2
    exit 1
fi
echo "lerobot_check: OK: $(tail -n 1 "$work/lerobot.log")"
