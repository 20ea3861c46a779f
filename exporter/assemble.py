"""Assemble episode shards into one LeRobot v3 study dataset (shard.md section 10).

Each shard's metadata is checked against its receipt, the shards are ordered (by episode index, in
the order given, or by recording time) and laid over one folder as episodes 0..M-1, renumbered where
their indices differ, and the dataset-wide files are rebuilt: ``meta/info.json``, ``meta/stats.json``
(exact over every data row) and ``meta/tasks.parquet``. Large files are verified while they are
copied (or hard-linked after hashing), so each byte is read once, and their digests go straight into
the dataset receipt; statistics are gathered a row group at a time into column scratches (in memory up
to a budget, else files). The shards' ``ceres/`` files move under ``ceres/episodes/episode-NNNNNN/``;
``ceres/assembly.json`` maps new to source episodes and ``ceres/dataset-receipt.json`` lists every file. The
dataset is staged in a temporary folder beside the output folder and renamed into place, so it appears
complete or not at all.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import math
import os
import pickle
import re
import shutil
import string
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow._parquet as _parquet
import pyarrow.parquet as pq

from exporter import forked
from exporter.arrow import from_values, to_numpy
from exporter.errors import AssemblyError
from exporter.features import dictionary_columns
from exporter.jsonfile import write_json
from exporter.modes import publish_modes
from exporter.parquet_columns import replace_column_parts
from exporter.receipt import (
    RECEIPT,
    build_artefacts,
    bytes_digest,
    check_artefacts,
    digest_problems,
    file_digest,
    read_artefacts,
    verify_artefacts,
)
from exporter.stats import ColumnScratch, collect, dimension_stats, feature_stats, pooled_image_stats
from exporter.task_table import read_tasks
from exporter.timestamps import rfc3339

EPISODE_METADATA = "ceres/episode-metadata.json"
REDACTION = "ceres/redaction.json"  # only in a shard derived with its video redacted (exporter/redact.py)
TASK_SPECIFICATIONS = "ceres/task-specifications"
ASSEMBLY = "ceres/assembly.json"
DATASET_RECEIPT = "ceres/dataset-receipt.json"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATASET_WIDE = ("meta/info.json", "meta/stats.json", "meta/tasks.parquet")
# Largest block of a data file read at once (its state column as float64) while gathering statistics.
STATS_MEMORY_BUDGET = 256 * 1024 * 1024
# The column scratch of every feature (float32 states) is held in memory up to this size, in a temporary
# file beyond it (twenty one-to-three-minute shards: 117 MiB; a thousand two-second ones: 98 MiB).
SCRATCH_MEMORY_BYTES = 128 * 1024 * 1024
# A renumbered data file up to this size is read into memory once (hashed, spliced, its statistics decoded
# from the same bytes); a larger one (hours of states) is hashed as it is read and rewritten from the file.
SPLICE_MEMORY_BYTES = 64 * 1024 * 1024
ORDERS = ("index", "given", "recorded")
# From this many shards on, a helper process reads and lays over shards beside the threads of this one.
HELPER_SHARDS = 64
_HELPER_AHEAD = 2  # jobs sent to the helper before its reply to the first is read
_LAY_OVER_THREADS = min(2, os.cpu_count() or 1)
_LARGE = ("data/", "videos/")  # artefacts verified while they are copied, not before


@dataclass(frozen=True)
class AssembledEpisode:
    episode_index: int
    source_episode_index: int
    episode_id: str
    length: int


@dataclass(frozen=True)
class AssemblyResult:
    dataset_dir: Path
    episodes: list[AssembledEpisode]
    total_frames: int
    total_tasks: int
    renumbered: bool
    receipt_sha256: str


@dataclass(frozen=True)
class _Shard:
    path: Path
    episode_index: int
    episode_id: str
    info: dict[str, Any]
    episode: dict[str, Any]
    tasks: list[str]
    receipt_sha256: str
    recorded_at: str
    camera_stats: dict[str, dict[str, Any]]  # the episode row's sampled-frame statistics of each camera

    @property
    def label(self) -> str:
        return f"episode {self.episode_index} (id {self.episode_id})"

    @property
    def video_keys(self) -> list[str]:
        return [name for name, spec in self.info["features"].items() if spec["dtype"] == "video"]

    def data_file(self) -> str:
        return self.info["data_path"].format(
            chunk_index=self.episode["data/chunk_index"], file_index=self.episode["data/file_index"]
        )

    def episodes_file(self) -> str:
        return EPISODES_PATH.format(
            chunk_index=self.episode["meta/episodes/chunk_index"],
            file_index=self.episode["meta/episodes/file_index"],
        )

    def video_file(self, key: str) -> str:
        return self.info["video_path"].format(
            video_key=key,
            chunk_index=self.episode[f"videos/{key}/chunk_index"],
            file_index=self.episode[f"videos/{key}/file_index"],
        )


def assemble_dataset(
    out_dir: Path,
    shard_dirs: list[Path],
    *,
    created_at: datetime | None = None,
    order: str = "index",
    link: bool = False,
) -> AssemblyResult:
    """Assemble ``shard_dirs`` into a new study dataset at ``out_dir``; AssemblyError if they do not fit.

    ``order``: ``index`` (by the shards' episode index; shards with equal indices, such as shards
    exported apart as episode 0, in the order given), ``given``, or ``recorded`` (by ``recorded_at``,
    ties in the order given). ``link``: hard-link the unchanged files (videos, and data of episodes
    that keep their indices) instead of copying them, where the file system allows it.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise AssemblyError("output folder exists and is not empty", path=str(out_dir))
    if not shard_dirs:
        raise AssemblyError("no shards to assemble")
    if order not in ORDERS:
        raise AssemblyError(f"order must be one of {', '.join(ORDERS)}, not {order!r}", path="--order")
    # for many shards a second process reads and lays over shards beside this one, from the start
    helper = _Helper() if len(shard_dirs) >= HELPER_SHARDS and (os.cpu_count() or 1) > 1 else None
    try:
        return _assemble(out_dir, shard_dirs, created_at, order, link, helper)
    finally:
        if helper is not None:
            helper.close()


def _assemble(out_dir: Path, shard_dirs: list[Path], created_at: datetime | None, order: str, link: bool,
              helper: _Helper | None) -> AssemblyResult:
    shards = _read_shards(shard_dirs, helper)
    if order == "index":
        shards.sort(key=lambda s: s.episode_index)
    elif order == "recorded":
        shards.sort(key=lambda s: s.recorded_at)
    _check_agreement(shards)
    tasks_source = _longest_task_table(shards)
    _check_unique(shards)
    created = (created_at or datetime.now(UTC)).astimezone(UTC)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".assembling", dir=out_dir.parent))
    try:
        known: dict[str, tuple[str, int]] = {}  # dataset file -> digest and size taken while writing it
        with _DatasetStats(shards, stage) as stats:
            # the statistics are taken as soon as every data row is gathered, beside the rest of the laying over
            statistics = _Background(lambda: _dataset_stats(shards, stats))
            try:
                episodes = _lay_over(stage, shards, stats, known, link=link, helper=helper,
                                     rows_gathered=statistics.start)
            finally:
                statistics.wait()
            dataset_stats = statistics.result()
        total_frames = sum(e.length for e in episodes)
        known["meta/tasks.parquet"] = _copy(tasks_source.path / "meta/tasks.parquet", stage / "meta/tasks.parquet")
        _write_json(stage / "meta/info.json", _dataset_info(shards[0].info, episodes, tasks_source))
        _write_json(stage / "meta/stats.json", dataset_stats)
        _write_json(stage / ASSEMBLY, _assembly(shards, episodes, created))
        receipt = _dataset_receipt(stage, len(episodes), created, known)
        _write_json(stage / DATASET_RECEIPT, receipt)
        receipt_sha256 = file_digest(stage / DATASET_RECEIPT)[0]
        publish_modes(stage)
        if out_dir.exists():
            out_dir.rmdir()
        os.rename(stage, out_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return AssemblyResult(
        dataset_dir=out_dir,
        episodes=episodes,
        total_frames=total_frames,
        total_tasks=len(tasks_source.tasks),
        renumbered=any(e.episode_index != e.source_episode_index for e in episodes),
        receipt_sha256=receipt_sha256,
    )


def verify_dataset(dataset_dir: Path) -> list[str]:
    """Problems of an assembled dataset against ``ceres/dataset-receipt.json``; empty means intact."""
    return verify_artefacts(Path(dataset_dir), DATASET_RECEIPT)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Assemble episode shards into one LeRobot v3 study dataset (shard.md section 10)."
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="new dataset folder (absent or empty)")
    parser.add_argument(
        "shard_dirs", type=Path, nargs="+", metavar="SHARD_DIR", help="episode shard folders (episode-NNNNNN)"
    )
    parser.add_argument(
        "--order",
        choices=ORDERS,
        default="index",
        help="episode order: by episode index, equal indices in the order given (default); as given; "
        "or by recorded_at",
    )
    parser.add_argument(
        "--link", action="store_true", help="hard-link unchanged files instead of copying them (same file system)"
    )


def run(args: argparse.Namespace) -> int:
    result = assemble_dataset(args.out_dir, args.shard_dirs, order=args.order, link=args.link)
    left_out = " (renumbered)" if result.renumbered else ""
    print(
        f"assembled {len(result.episodes)} episodes, {result.total_frames} frames, "
        f"{result.total_tasks} tasks{left_out} into {result.dataset_dir}"
    )
    return 0


def _fails_receipt(path: Path, problems: list[str]) -> AssemblyError:
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    return AssemblyError(f"shard fails its receipt: {problems[0]}{more}", path=str(path))


def _run_all(targets: list[Callable[[], None]], failures: dict) -> None:
    """Run each target in a thread of its own and wait for all; then raise the failure of the first job in order
    (the jobs record theirs in ``failures``, keyed by their place in it), so that which one is reported does not
    depend on the threads' timing."""
    workers = [threading.Thread(target=target) for target in targets]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[min(failures)]


def _read_shards(paths: list[Path], helper: _Helper | None = None) -> list[_Shard]:
    """Every shard's metadata. Task tables and feature tables that are byte-equal or equal are read or
    held once, so memory grows little with the number of shards. With a ``helper`` process, shards are read
    here and there side by side (the work is interpreter-bound); the first shard in the order given that
    fails is the one reported, as when they are read one after the other."""
    tasks: dict[str, list[str]] = {}  # SHA-256 of a meta/tasks.parquet -> its texts
    features: dict[str, dict[str, Any]] = {}  # canonical JSON -> one shared feature table
    paths = [Path(path) for path in paths]
    if helper is None:
        return [_read_shard(path, tasks, features) for path in paths]
    task_lists: dict[tuple[str, ...], list[str]] = {}  # the helper's task tables, held once here too
    results: dict[int, _Shard] = {}
    failures: dict[int, BaseException] = {}
    jobs = iter(range(len(paths)))
    take = threading.Lock()

    def next_job() -> int | None:
        with take:
            return None if failures else next(jobs, None)

    def here() -> None:
        while (i := next_job()) is not None:
            try:
                results[i] = _read_shard(paths[i], tasks, features)
            except BaseException as exc:  # reported below, the first in the order given
                failures[i] = exc

    def received(i: int, shard: _Shard) -> None:
        info = shard.info
        info["features"] = next((known for known in features.values() if known == info["features"]), None) or \
            features.setdefault(json.dumps(info["features"], sort_keys=True), info["features"])
        results[i] = dataclasses.replace(shard, tasks=task_lists.setdefault(tuple(shard.tasks), shard.tasks))

    def failed(i: int, exc: BaseException) -> None:
        failures[i] = exc

    def helped() -> None:
        helper.pipeline(next_job, lambda i: ("read", paths[i]), received, failed)

    _run_all([helped, *([here] if _LAY_OVER_THREADS else [])], failures)
    return [results[i] for i in range(len(paths))]


def _read_shard(path: Path, tasks: dict[str, list[str]], features: dict[str, dict[str, Any]]) -> _Shard:
    """The shard's metadata, its small files checked against its receipt (large ones are checked as
    they are copied). Only the episode row's own columns are kept, not its statistics."""
    if not (path / RECEIPT).is_file():
        raise AssemblyError("not an episode shard (no receipt)", path=str(path / RECEIPT))
    receipt_bytes = (path / RECEIPT).read_bytes()
    try:
        receipt = json.loads(receipt_bytes)
        names = [a["path"] for a in receipt["artefacts"]]
    except (ValueError, KeyError, TypeError):
        names = []
    problems, _ = check_artefacts(path, RECEIPT, names=[n for n in names if not str(n).startswith(_LARGE)])
    if problems:
        raise _fails_receipt(path, problems)
    # Everything a path is made from is checked before anything is written: the receipt's own fields and
    # paths, info.json's templates and sizes, the episode row's indices.
    for name in names:
        _check_relative(name, "a receipt artefact path", path / RECEIPT)
    index = _count(receipt.get("episode_index"), "episode_index", path / RECEIPT)
    if not isinstance(receipt.get("episode_id"), str) or not receipt["episode_id"]:
        raise AssemblyError("episode_id must be a non-empty string", path=str(path / RECEIPT))
    info = _read_json(path / "meta/info.json")
    _check_info(info, path / "meta/info.json")
    info["features"] = features.setdefault(json.dumps(info["features"], sort_keys=True), info["features"])
    episodes_file = path / EPISODES_PATH.format(
        chunk_index=index // info["chunks_size"], file_index=index % info["chunks_size"]
    )
    try:
        episodes = _parquet_reader(episodes_file)
        cameras = {f"stats/{name}/" for name, spec in info["features"].items() if spec["dtype"] == "video"}
        schema = episodes.schema_arrow
        wanted = [name for name in schema.names
                  if not name.startswith("stats/") or name[: name.rindex("/") + 1] in cameras]
        rows = _read_columns(episodes, schema, wanted, episodes_file).to_pylist()
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise AssemblyError(f"unreadable episode row: {exc}", path=str(episodes_file)) from None
    if len(rows) != 1 or rows[0].get("episode_index") != index:
        raise AssemblyError(f"expected one row for episode {index}", path=str(episodes_file))
    camera_stats: dict[str, dict[str, Any]] = {}
    for name in [name for name in rows[0] if name.startswith("stats/")]:
        _, camera, stat = name.rsplit("/", 2)
        camera_stats.setdefault(camera, {})[stat] = rows[0].pop(name)
    _check_episode_row(rows[0], info, episodes_file)
    metadata = _read_json(path / EPISODE_METADATA)
    digests = {a["path"]: a["sha256"] for a in receipt["artefacts"]}
    tasks_key = digests.get("meta/tasks.parquet", str(path))
    if tasks_key not in tasks:
        tasks[tasks_key] = read_tasks(path / "meta/tasks.parquet")
    shard = _Shard(
        path=path,
        episode_index=index,
        episode_id=receipt["episode_id"],
        info=info,
        episode=rows[0],
        tasks=tasks[tasks_key],
        camera_stats=camera_stats,
        receipt_sha256=bytes_digest(receipt_bytes)[0],
        recorded_at=str(metadata.get("recorded_at") or ""),
    )
    _check_artefacts(shard, names)
    return shard


_TEMPLATE_FIELDS = {"data_path": {"chunk_index", "file_index"},
                    "video_path": {"video_key", "chunk_index", "file_index"}}
_TEMPLATE_PLACES = {"data_path": ("data/", ".parquet"), "video_path": ("videos/", ".mp4")}
_INDEX_FORMAT = re.compile(r"(0?[1-9][0-9]?)?d?")  # "", "03d", "3", "d": a bounded width, digits only


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise AssemblyError(f"unreadable JSON: {exc}", path=str(path)) from None


def _count(value: Any, what: str, where: Path, *, low: int = 0) -> int:
    """``value`` when it is a whole number (not a boolean) of at least ``low``; ``AssemblyError`` otherwise."""
    if type(value) is not int or value < low:
        raise AssemblyError(f"{what} must be a whole number of at least {low}, not {value!r}", path=str(where))
    return value


def _check_relative(name: Any, what: str, where: Path) -> str:
    """A relative ``/``-separated path that stays in its folder: no absolute path, ``..``, ``.``, empty part,
    backslash or control character."""
    if (not isinstance(name, str) or not name or name.startswith("/") or "\\" in name
            or any(part in ("", ".", "..") for part in name.split("/"))
            or any(ord(char) < 32 or ord(char) == 127 for char in name)):
        raise AssemblyError(f"{what} {name!r} is not a relative path inside the folder", path=str(where))
    return name


def _check_info(info: Any, where: Path) -> None:
    """``meta/info.json`` as assembly uses it: ``chunks_size`` a positive whole number, ``fps`` a positive number,
    ``features`` names with a dtype and a shape, and the path templates (``video_path`` when a feature is a
    video) using only their own fields, each expanding to a path inside the dataset for every video key."""
    if not isinstance(info, dict):
        raise AssemblyError("not a JSON object", path=str(where))
    _count(info.get("chunks_size"), "chunks_size", where, low=1)
    fps = info.get("fps")
    if type(fps) not in (int, float) or not math.isfinite(fps) or fps <= 0:
        raise AssemblyError(f"fps must be a positive number, not {fps!r}", path=str(where))
    features = info.get("features")
    if not isinstance(features, dict) or not features:
        raise AssemblyError("features must be a non-empty object", path=str(where))
    for name, spec in features.items():
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if (not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str) or not isinstance(shape, list)
                or not shape or not all(type(size) is int and size >= 1 for size in shape)):
            raise AssemblyError(f"feature {name!r} needs a dtype and a shape of positive whole numbers",
                                path=str(where))
    video_keys = [name for name, spec in features.items() if spec["dtype"] == "video"]
    for key in video_keys:
        if len(features[key]["shape"]) != 3:
            raise AssemblyError(f"video feature {key!r} needs a shape of height, width and channels", path=str(where))
    for template, keys in (("data_path", [None]), ("video_path", video_keys)):
        if not keys:
            continue
        text = info.get(template)
        if not isinstance(text, str):
            raise AssemblyError(f"{template} must be a path template, not {text!r}", path=str(where))
        try:
            fields = [(field, spec, conversion) for _, field, spec, conversion in string.Formatter().parse(text)
                      if field is not None]
        except ValueError as exc:
            raise AssemblyError(f"{template} {text!r} is not a path template: {exc}", path=str(where)) from None
        for field, spec, conversion in fields:
            if field not in _TEMPLATE_FIELDS[template] or conversion is not None or (
                    field != "video_key" and not _INDEX_FORMAT.fullmatch(spec or "")) or (
                    field == "video_key" and spec):
                raise AssemblyError(f"{template} {text!r}: {{{field}}} is not one of its fields "
                                    f"({', '.join(sorted(_TEMPLATE_FIELDS[template]))}) as a plain value",
                                    path=str(where))
        prefix, suffix = _TEMPLATE_PLACES[template]
        for key in keys:
            if key is not None and ("/" in key or key in (".", "..")):
                raise AssemblyError(f"video feature name {key!r} cannot be a folder name", path=str(where))
            place = text.format(chunk_index=0, file_index=0, video_key=key)
            _check_relative(place, template, where)
            if not place.startswith(prefix) or not place.endswith(suffix):
                raise AssemblyError(f"{template} {text!r} must give a path under {prefix} ending in {suffix}",
                                    path=str(where))


def _check_episode_row(row: dict[str, Any], info: dict[str, Any], where: Path) -> None:
    """The episode row's length and the indices its files are found and placed by: whole numbers, at least 0."""
    video_keys = [name for name, spec in info["features"].items() if spec["dtype"] == "video"]
    names = ["length", "dataset_from_index", "dataset_to_index"] + [
        f"{prefix}/{part}" for prefix in ["data", "meta/episodes", *(f"videos/{key}" for key in video_keys)]
        for part in ("chunk_index", "file_index")]
    for name in names:
        _count(row.get(name), name, where)
    if row["dataset_to_index"] - row["dataset_from_index"] != row["length"]:
        raise AssemblyError("dataset_to_index - dataset_from_index is not the episode's length", path=str(where))


def _check_artefacts(shard: _Shard, paths: list[str]) -> None:
    """Every artefact of the shard must have a place in the dataset: nothing is dropped silently."""
    known = {*DATASET_WIDE, EPISODE_METADATA, shard.data_file(), shard.episodes_file()}
    known.update(shard.video_file(key) for key in shard.video_keys)
    for path in paths:
        if path not in known and path != REDACTION and not path.startswith(f"{TASK_SPECIFICATIONS}/"):
            raise AssemblyError(f"{shard.label}: unexpected artefact {path}", path=str(shard.path))
    missing = sorted(known - set(paths))
    if missing:
        raise AssemblyError(f"{shard.label}: artefact {missing[0]} is missing", path=str(shard.path))


def _check_unique(shards: list[_Shard]) -> None:
    """Each episode once: shards may share an episode index (exported apart), not an episode id."""
    seen: dict[str, _Shard] = {}
    for shard in shards:
        before = seen.setdefault(shard.episode_id, shard)
        if before is shard:
            continue
        if before.episode_index == shard.episode_index:
            raise AssemblyError(
                f"two shards for episode index {shard.episode_index} hold the same episode (id {shard.episode_id}): "
                f"{before.path} and {shard.path}"
            )
        raise AssemblyError(
            f"two shards hold the same episode (id {shard.episode_id}): {before.path} (episode index "
            f"{before.episode_index}) and {shard.path} (episode index {shard.episode_index})"
        )


def _check_agreement(shards: list[_Shard]) -> None:
    def feature_set(info: dict[str, Any]) -> dict[str, str]:
        return {
            name: spec["dtype"] if spec["dtype"] == "video" else f"{spec['dtype']}{list(spec['shape'])}"
            for name, spec in info["features"].items()
        }

    def resolution(info: dict[str, Any]) -> dict[str, str]:
        return {
            name: f"{spec['shape'][1]}x{spec['shape'][0]}"
            for name, spec in info["features"].items()
            if spec["dtype"] == "video"
        }

    _agree(shards, "fps", lambda s: {"fps": str(s.info["fps"])})
    _agree(shards, "feature set", lambda s: feature_set(s.info))
    _agree(shards, "camera resolution", lambda s: resolution(s.info))


def _agree(shards: list[_Shard], what: str, describe: Callable[[_Shard], dict[str, str]]) -> None:
    groups: dict[tuple, list[_Shard]] = {}
    for shard in shards:
        groups.setdefault(tuple(sorted(describe(shard).items())), []).append(shard)
    if len(groups) == 1:
        return
    common = set.intersection(*(set(key) for key in groups))
    parts = []
    for key, members in groups.items():
        own = ", ".join(f"{name} {value}" for name, value in key if (name, value) not in common)
        parts.append(f"{own or 'nothing else'} in {', '.join(s.label for s in members)}")
    raise AssemblyError(f"shards disagree on {what}: " + "; ".join(parts))


def _longest_task_table(shards: list[_Shard]) -> _Shard:
    longest = max(reversed(shards), key=lambda s: len(s.tasks))
    for shard in shards:
        if longest.tasks[: len(shard.tasks)] != shard.tasks:
            row = next(i for i, (a, b) in enumerate(zip(shard.tasks, longest.tasks, strict=False)) if a != b)
            raise AssemblyError(
                f"meta/tasks.parquet of {shard.label} is not a prefix of the longest task table "
                f"({longest.label}): row {row} is {shard.tasks[row]!r} there but {longest.tasks[row]!r}",
                path=str(shard.path / "meta/tasks.parquet"),
            )
    return longest


def _lay_over(
    stage: Path, shards: list[_Shard], stats: _DatasetStats, known: dict[str, tuple[str, int]], *, link: bool,
    helper: _Helper | None = None, rows_gathered: Callable[[], None] = lambda: None,
) -> list[AssembledEpisode]:
    """Lay every shard over the staging folder, two at a time (hashing, copying and parquet encoding
    release the GIL) and, for many shards, a third in a helper process (the fixed cost of a short shard is
    interpreter work, which threads cannot share out); the first shard in dataset order that fails is the
    one reported (shards before a failed one are still laid over, so a failure among them is found).
    Without a helper every shard's data file comes first, then its other files, and ``rows_gathered`` is
    called once every data row is in ``stats`` (and nothing has failed), so the statistics can be taken
    while the videos and episode rows are still being written."""
    starts = np.cumsum([0, *(s.episode["length"] for s in shards)])
    if helper is None:
        order = [(i, (_DATA,)) for i in range(len(shards))] + [(i, (_REST,)) for i in range(len(shards))]
    else:
        order = [(i, (_DATA, _REST)) for i in range(len(shards))]
    jobs = iter(order)
    take = threading.Lock()
    results: dict[int, tuple[AssembledEpisode, dict[str, tuple[str, int]]]] = {}
    failures: dict[int, BaseException] = {}
    gathering = [len(shards)]  # data files whose rows are not yet in the statistics

    def next_job() -> tuple[int, tuple[str, ...]] | None:
        with take:
            while (job := next(jobs, None)) is not None and failures and job[0] > min(failures):
                pass
            return job

    def done(new_index: int, result: tuple[AssembledEpisode, dict[str, tuple[str, int]]], parts: tuple) -> None:
        with take:
            if new_index in results:
                results[new_index][1].update(result[1])
            else:
                results[new_index] = result
            if _DATA in parts:
                gathering[0] -= 1
                if gathering[0] == 0 and not failures:
                    rows_gathered()

    def here() -> None:
        while (job := next_job()) is not None:
            new_index, parts = job
            try:
                done(new_index, _lay_over_one(stage, shards[new_index], new_index, int(starts[new_index]), stats,
                                              link=link, parts=parts), parts)
            except BaseException as exc:  # reported below, the first in dataset order
                with take:
                    failures.setdefault(new_index, exc)

    def request(job: tuple[int, tuple[str, ...]]) -> tuple:
        new_index = job[0]
        return ("lay over", stage, shards[new_index], new_index, int(starts[new_index]), link)

    def received(job: tuple[int, tuple[str, ...]], result: Any) -> None:
        new_index, parts = job
        from_index = int(starts[new_index])
        # the statistics are read here, from the file as laid over
        stats.add_file(stage / _renumbered(shards[new_index], new_index, from_index).data_file(), from_index)
        done(new_index, result, parts)

    def failed(job: tuple[int, tuple[str, ...]], exc: BaseException) -> None:
        with take:
            failures.setdefault(job[0], exc)

    def helped(helper: _Helper) -> None:
        helper.pipeline(next_job, request, received, failed)

    _run_all([here] * _LAY_OVER_THREADS + ([lambda: helped(helper)] if helper is not None else []), failures)
    ordered = [results[new_index] for new_index in range(len(shards))]
    for _, digests in ordered:
        known.update(digests)
    for shard in shards:
        _copy_task_specifications(shard, stage, known)
    return [episode for episode, _ in ordered]


class _Background:
    """Work run in a thread of its own once ``start`` is called, or here when ``result`` is asked first."""

    def __init__(self, work: Callable[[], Any]):
        self.work = work
        self.thread: threading.Thread | None = None
        self.value: Any = None
        self.error: BaseException | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.value = self.work()
        except BaseException as exc:  # raised again by result()
            self.error = exc

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()

    def result(self) -> Any:
        if self.thread is None:
            return self.work()
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value


class _Helper:
    """A second Python process that lays shards over the staging folder, one job at a time over its standard
    input and output (pickled, length-prefixed). It dies with this process (``PR_SET_PDEATHSIG``), and is
    killed and waited for when the assembly ends, so nothing writes into a staging folder being removed."""

    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from exporter.assemble import _helper_main; _helper_main()", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )

    def pipeline(self, next_job: Callable[[], Any], request: Callable[[Any], tuple],
                 received: Callable[[Any, Any], None], failed: Callable[[Any, BaseException], None]) -> None:
        """Send the helper the jobs ``next_job`` gives (``request`` makes each one's message) until it gives
        ``None``, two ahead, so the helper has the next one to hand while this process's thread waits for its
        turn at the interpreter; each reply goes to ``received`` or, for a failure, ``failed``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        pending: collections.deque[Any] = collections.deque()
        while True:
            while len(pending) < _HELPER_AHEAD and (job := next_job()) is not None:
                try:
                    _send(self.process.stdin, request(job))
                except BaseException as exc:
                    failed(job, exc)
                    continue
                pending.append(job)
            if not pending:
                return
            job = pending.popleft()
            try:
                ok, value = _receive(self.process.stdout)
                if not ok:
                    raise value
                received(job, value)
            except BaseException as exc:
                failed(job, exc)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


def _send(pipe: Any, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(struct.pack("<Q", len(data)) + data)
    pipe.flush()


def _receive(pipe: Any) -> Any:
    header = pipe.read(8)
    if len(header) < 8:
        raise OSError("the assembly helper process ended")
    data = pipe.read(struct.unpack("<Q", header)[0])
    return pickle.loads(data)  # noqa: S301  (a pipe to or from this process's own helper)


def _helper_main() -> None:
    """The helper process: reads or lays over the shards it is sent until its input ends."""
    if not forked.die_with_parent(int(sys.argv[1])):  # killed with the assembling process, whatever kills it
        return
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to standard error, not into the replies
    stats = _NoStats()
    tasks: dict[str, list[str]] = {}
    features: dict[str, dict[str, Any]] = {}
    while True:
        header = requests.read(8)
        if len(header) < 8:
            return
        job = requests.read(struct.unpack("<Q", header)[0])
        kind, *arguments = pickle.loads(job)  # noqa: S301  (from the assembling process)
        try:
            if kind == "read":
                reply: tuple[bool, Any] = (True, _read_shard(arguments[0], tasks, features))
            else:
                stage, shard, new_index, from_index, link = arguments
                reply = (True, _lay_over_one(stage, shard, new_index, from_index, stats, link=link))
        except Exception as exc:  # raised again in the assembling process
            reply = (False, exc)
        _send(replies, reply)


class _NoStats:
    """Statistics are the assembling process's: the helper only splices, copies and hashes."""

    def read_whole(self, data: pq.ParquetFile) -> None:
        return None

    def add_file(self, *args: Any, **kwargs: Any) -> None:
        pass


_DATA, _REST = "data", "rest"  # the parts of laying over one shard: its data file; its other files


def _lay_over_one(
    stage: Path, shard: _Shard, new_index: int, from_index: int, stats: _DatasetStats, *, link: bool,
    parts: tuple[str, ...] = (_DATA, _REST),
) -> tuple[AssembledEpisode, dict[str, tuple[str, int]]]:
    """One shard laid over the staging folder as episode ``new_index`` (its data file, its other files, or
    both: ``parts``); the digests of what it wrote."""
    known: dict[str, tuple[str, int]] = {}
    target = _renumbered(shard, new_index, from_index)
    if _DATA in parts:
        _lay_over_data(stage, shard, target, from_index, stats, known, link=link)
    if _REST in parts:
        _lay_over_rest(stage, shard, target, new_index, known, link=link)
    return AssembledEpisode(new_index, shard.episode_index, shard.episode_id, shard.episode["length"]), known


def _take_over(stage: Path, shard: _Shard, places: dict[str, str], known: dict[str, tuple[str, int]], *,
               link: bool) -> None:
    """Files taken over unchanged (shard path -> dataset path), checked against the receipt as they are copied
    (or before they are linked); the receipt's file list is checked too."""
    for place in places.values():
        (stage / place).parent.mkdir(parents=True, exist_ok=True)
    copies = {} if link else {name: stage / place for name, place in places.items()}
    problems, digests = check_artefacts(shard.path, RECEIPT, copies=copies, names=sorted(places))
    if problems:
        raise _fails_receipt(shard.path, problems)
    for name, place in places.items():
        if link:
            _link_or_copy(shard.path / name, stage / place)
        known[place] = digests[name]


def _lay_over_data(stage: Path, shard: _Shard, target: _Shard, from_index: int, stats: _DatasetStats,
                   known: dict[str, tuple[str, int]], *, link: bool) -> None:
    """The shard's data file: taken over when no index changes, else spliced; its rows go into ``stats``."""
    if target is shard:
        _take_over(stage, shard, {shard.data_file(): target.data_file()}, known, link=link)
        stats.add_file(shard.path / shard.data_file(), from_index)
    elif _size(shard.path / shard.data_file()) <= SPLICE_MEMORY_BYTES:
        data = _read_verified(shard, shard.data_file())  # read once: checked, spliced and its statistics taken
        known[target.data_file()] = _write_data(data, stage / target.data_file(), target, stats)
    else:
        _check(shard, [shard.data_file()])  # hashed as it is read, then rewritten from the file
        known[target.data_file()] = _write_long_data(shard.path / shard.data_file(), stage / target.data_file(),
                                                     target, stats)


def _check(shard: _Shard, names: list[str]) -> None:
    problems, _ = check_artefacts(shard.path, RECEIPT, names=names)
    if problems:
        raise _fails_receipt(shard.path, problems)


def _lay_over_rest(stage: Path, shard: _Shard, target: _Shard, new_index: int, known: dict[str, tuple[str, int]],
                   *, link: bool) -> None:
    """The shard's videos (taken over), episode row (rewritten when renumbered) and ``ceres/`` files."""
    _take_over(stage, shard, {shard.video_file(key): target.video_file(key) for key in shard.video_keys}, known,
               link=link)
    if target is shard:
        known[target.episodes_file()] = _copy(shard.path / shard.episodes_file(), stage / target.episodes_file())
    else:
        known[target.episodes_file()] = _write_episode_row(
            shard.path / shard.episodes_file(), stage / target.episodes_file(), target, shard.episode
        )
    moved = f"ceres/episodes/episode-{new_index:06d}"
    for source, name in ((EPISODE_METADATA, "episode-metadata.json"), (RECEIPT, "source-receipt.json"),
                         (REDACTION, "redaction.json")):
        if source != REDACTION or (shard.path / source).is_file():
            known[f"{moved}/{name}"] = _copy(shard.path / source, stage / moved / name)


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link where the file system allows one, else a copy (the source was just verified)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _renumbered(shard: _Shard, new_index: int, from_index: int) -> _Shard:
    """The shard as it sits in the dataset; the shard itself when no index changes."""
    row = shard.episode
    if row["episode_index"] == new_index and row["dataset_from_index"] == from_index:
        return shard
    chunks_size = shard.info["chunks_size"]
    place = {"chunk_index": new_index // chunks_size, "file_index": new_index % chunks_size}
    row = dict(row)
    row["episode_index"] = new_index
    row["dataset_from_index"] = from_index
    row["dataset_to_index"] = from_index + row["length"]
    for prefix in ["data", "meta/episodes", *(f"videos/{key}" for key in shard.video_keys)]:
        row[f"{prefix}/chunk_index"] = place["chunk_index"]
        row[f"{prefix}/file_index"] = place["file_index"]
    return dataclasses.replace(shard, episode_index=new_index, episode=row)


def _read_verified(shard: _Shard, name: str) -> bytes:
    """The bytes of one of the shard's files, checked against its receipt."""
    path = shard.path / name
    if path.is_symlink() or not path.is_file():
        raise _fails_receipt(shard.path, [f"{name}: not a regular file"])
    data = path.read_bytes()
    try:
        artefacts = read_artefacts((shard.path / RECEIPT).read_bytes())
    except (OSError, ValueError) as exc:
        raise _fails_receipt(shard.path, [f"{RECEIPT}: {exc}"]) from None
    problems = digest_problems(artefacts, {name: bytes_digest(data)})
    if problems:
        raise _fails_receipt(shard.path, problems)
    return data


def _write_data(source: bytes, target: Path, shard: _Shard, stats: _DatasetStats) -> tuple[str, int]:
    """The data file (``source``, its bytes) with ``episode_index`` and ``index`` rewritten; its digest and
    size. Only those two columns are encoded anew: every other column chunk is copied as bytes, and the
    schema and the row groups stay as they are (a file that cannot be spliced so is rewritten whole, a
    row group at a time). Statistics decode only the columns they need."""
    data = pq.ParquetFile(pa.BufferReader(source))
    schema = data.schema_arrow
    whole = stats.read_whole(data)  # a short file's feature columns in one read, frame_index among them
    frame_index = (whole if whole is not None else data.read(columns=["frame_index"], use_threads=False))
    frame_index = to_numpy(frame_index.column("frame_index").combine_chunks())
    first_row = shard.episode["dataset_from_index"]
    columns = _new_columns(data, shard, frame_index)
    parts: list[Any] | None = replace_column_parts(source, columns, schema=schema,
                                                   use_dictionary=dictionary_columns(list(columns)))
    if parts is None:
        parts = [_rewrite_data(data, columns)]
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with target.open("xb") as out:  # the pieces written and hashed in turn, never joined into one copy
        for part in parts:
            digest.update(part)
            out.write(part)
    stats.add_file(data, first_row, columns, whole=whole)
    return digest.hexdigest(), sum(len(part) for part in parts)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # missing: the receipt check names it


def _new_columns(data: pq.ParquetFile, shard: _Shard, frame_index: np.ndarray) -> dict[str, pa.Array]:
    first_row = shard.episode["dataset_from_index"]
    new = {"episode_index": np.full(len(frame_index), shard.episode_index), "index": first_row + frame_index}
    return {name: from_values(values, data.schema_arrow.field(name).type) for name, values in new.items()}


def _write_long_data(source: Path, target: Path, shard: _Shard, stats: _DatasetStats) -> tuple[str, int]:
    """``_write_data`` for a data file larger than ``SPLICE_MEMORY_BYTES`` (already checked against the
    receipt): rewritten whole from the file a row group at a time, so memory stays one row group."""
    data = pq.ParquetFile(source)
    frame_index = to_numpy(data.read(columns=["frame_index"], use_threads=False).column("frame_index")
                            .combine_chunks())
    columns = _new_columns(data, shard, frame_index)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("xb") as out:
        _rewrite_data(data, columns, out)
    stats.add_file(data, shard.episode["dataset_from_index"], columns)
    return file_digest(target)


def _rewrite_data(data: pq.ParquetFile, columns: dict[str, pa.Array], out: Any = None) -> bytes:
    """The whole data file written again with ``columns`` replaced, a row group at a time (to ``out``, a
    binary file, or returned)."""
    sink = pa.BufferOutputStream() if out is None else out
    first = 0
    dictionary = dictionary_columns(data.schema_arrow.names)
    with pq.ParquetWriter(sink, data.schema_arrow, use_dictionary=dictionary) as writer:
        for group in range(data.num_row_groups):
            table = data.read_row_group(group)
            for name, values in columns.items():
                i = table.schema.get_field_index(name)
                table = table.set_column(i, table.schema.field(i), values.slice(first, table.num_rows))
            writer.write_table(table, row_group_size=max(1, table.num_rows))
            first += table.num_rows
    return sink.getvalue().to_pybytes() if out is None else b""


def _write_episode_row(source: Path, target: Path, shard: _Shard, before: dict[str, Any]) -> tuple[str, int]:
    """Rewrite the episode row's locations and the statistics of the two renumbered columns; every
    other column (the row has thousands, most of them statistics) is kept as it is. ``before``: the row's
    own columns as the shard has them. Returns the written file's digest and size."""
    table = _parquet_reader(source).read_all(use_threads=False)  # read_table would import pyarrow.dataset and pandas
    row = {name: value for name, value in shard.episode.items() if before.get(name) != value}
    length = shard.episode["length"]
    new_values = {
        "episode_index": np.full(length, shard.episode_index),
        "index": np.arange(shard.episode["dataset_from_index"], shard.episode["dataset_to_index"]),
    }
    for name, values in new_values.items():
        for stat, value in feature_stats(values).items():
            row[f"stats/{name}/{stat}"] = value
    columns = table.columns
    for name, value in row.items():
        i = table.schema.get_field_index(name)
        if i >= 0:
            columns[i] = from_values([value], table.schema.field(i).type)
    # one new table, not one a column; written into memory and then as one block (pyarrow writing to a path
    # issues a write for each page of the row's 123 columns: twice the time), hashed on the way
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_arrays(columns, schema=table.schema), sink)
    data = sink.getvalue()
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("xb") as out:
        out.write(data)
    return bytes_digest(data)


def _parquet_reader(source: Path | pa.NativeFile) -> _parquet.ParquetReader:
    """pyarrow's reader of a parquet file, opened without ``pq.ParquetFile``'s Python work on each open (a map
    of every nested column path: about 1 ms for an episode row of 123 columns, a third of reading it)."""
    reader = _parquet.ParquetReader()
    reader.open(str(source) if isinstance(source, Path) else source, arrow_extensions_enabled=True)
    return reader


def _read_columns(reader: _parquet.ParquetReader, schema: pa.Schema, names: list[str], source: Path) -> pa.Table:
    """The top-level columns ``names`` of ``source``, open in ``reader``, whose arrow schema is ``schema``. Where
    every column is one parquet leaf (numbers, strings and lists of them, as in episode rows) a column's leaf
    index is its position; a file with struct or map columns is read through ``pq.ParquetFile``."""
    if not all(_one_leaf(field.type) for field in schema):
        return pq.ParquetFile(source).read(columns=names)
    return reader.read_all(column_indices=[schema.get_field_index(name) for name in names], use_threads=False)


def _one_leaf(type_: pa.DataType) -> bool:
    while pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        type_ = type_.value_type
    return not (pa.types.is_struct(type_) or pa.types.is_map(type_) or pa.types.is_union(type_))


def _copy_task_specifications(shard: _Shard, stage: Path, known: dict[str, tuple[str, int]]) -> None:
    folder = shard.path / TASK_SPECIFICATIONS
    if not folder.is_dir():
        return
    for spec in sorted(folder.iterdir()):
        name = f"{TASK_SPECIFICATIONS}/{spec.name}"
        target = stage / name
        if target.exists():
            if target.read_bytes() != spec.read_bytes():
                raise AssemblyError(
                    f"{shard.label}: task specification {spec.name} differs from another shard's file of the same name",
                    path=str(spec),
                )
            continue
        known[name] = _copy(spec, target)


def _dataset_info(info: dict[str, Any], episodes: list[AssembledEpisode], tasks: _Shard) -> dict[str, Any]:
    info = dict(info)
    info["total_episodes"] = len(episodes)
    info["total_frames"] = sum(e.length for e in episodes)
    info["total_tasks"] = len(tasks.tasks)
    info["splits"] = {"train": f"0:{len(episodes)}"}
    return info


class _DatasetStats:
    """Every data row of the dataset, gathered a block of rows at a time into one column scratch per
    non-video feature, for exact statistics a few dimensions at a time: in memory when the dataset's
    columns fit ``SCRATCH_MEMORY_BYTES``, else in files in the staging folder (unlinked), so memory holds
    a block or a few columns, never more than that budget of the dataset."""

    def __init__(self, shards: list[_Shard], folder: Path):
        rows = sum(s.episode["length"] for s in shards)
        self.features = {
            name: (int(np.prod(spec["shape"])), spec["dtype"])
            for name, spec in shards[0].info["features"].items()
            if spec["dtype"] != "video"
        }
        dtypes = {name: np.dtype(np.float32 if dtype == "float32" else np.float64)
                  for name, (_, dtype) in self.features.items()}
        in_memory = rows * sum(width * dtypes[name].itemsize
                               for name, (width, _) in self.features.items()) <= SCRATCH_MEMORY_BYTES
        self.scratches = {
            name: ColumnScratch(rows, width, dtypes[name], folder=folder, in_memory=in_memory)
            for name, (width, _) in self.features.items()
        }

    def add(self, columns: dict[str, pa.Array | pa.ChunkedArray], rows: int, first_row: int) -> None:
        """Rows ``first_row`` .. ``first_row + rows`` of the dataset, every feature's column among ``columns``
        (shards may be added in any order)."""
        for name, scratch in self.scratches.items():
            column = columns[name]
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            if pa.types.is_fixed_size_list(column.type) and column.null_count == 0:
                size = column.type.list_size  # its flatten() would import pyarrow.compute
                column = column.values.slice(column.offset * size, len(column) * size)
            elif pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type):
                column = column.flatten()
            scratch.write(first_row, to_numpy(column).reshape(rows, -1))

    def _batch_rows(self) -> int:
        width = sum(width for width, _ in self.features.values())
        return max(1, STATS_MEMORY_BUDGET // (8 * width))

    def read_whole(self, data: pq.ParquetFile) -> pa.Table | None:
        """The feature columns of a data file that fits one block, in one read; ``None`` for a longer one."""
        if data.metadata.num_rows > self._batch_rows():
            return None
        return data.read(columns=[name for name in self.features if name in data.schema_arrow.names],
                         use_threads=False)

    def add_file(self, data: Path | pq.ParquetFile, first_row: int, replaced: dict[str, pa.Array] | None = None,
                 *, whole: pa.Table | None = None) -> None:
        """A data file, read in blocks of rows, only the columns of features (``whole``: those columns
        already read); ``replaced`` gives the new values of columns that were rewritten (their old values
        are not used)."""
        replaced = replaced or {}
        wanted = [name for name in self.features if name not in replaced]
        if whole is not None:
            blocks: Any = [whole]
        else:
            data = data if isinstance(data, pq.ParquetFile) else pq.ParquetFile(data)
            blocks = data.iter_batches(batch_size=self._batch_rows(), columns=wanted)
        done = 0
        for block in blocks:
            columns = {name: block.column(name) for name in wanted}
            columns.update((name, values.slice(done, block.num_rows)) for name, values in replaced.items())
            self.add(columns, block.num_rows, first_row + done)
            done += block.num_rows

    def stats(self, name: str) -> dict[str, list]:
        scratch = self.scratches[name]
        width, _ = self.features[name]
        if width > 1:
            return scratch.stats()
        return collect([dimension_stats(scratch.dimension(0), vector=False)], scratch.rows)

    def __enter__(self) -> _DatasetStats:
        return self

    def __exit__(self, *exc: object) -> None:
        for scratch in self.scratches.values():
            scratch.close()


def _dataset_stats(shards: list[_Shard], gathered: _DatasetStats) -> dict[str, dict[str, list]]:
    """Exact statistics over every data row of the dataset; cameras pooled from the shards' samples."""
    stats = {}
    for name, spec in shards[0].info["features"].items():
        if spec["dtype"] == "video":
            stats[name] = pooled_image_stats([_camera_stats(s, name) for s in shards])
        else:
            stats[name] = gathered.stats(name)
    return stats


def _camera_stats(shard: _Shard, name: str) -> Any:
    """The camera's sampled-frame statistics from the shard's episode row (the same values as its
    ``meta/stats.json``, read with the row instead of parsing that file's thousands of numbers)."""
    stats = shard.camera_stats.get(name)
    if not stats or "count" not in stats:
        raise AssemblyError(f"no statistics of {name}", path=str(shard.path / shard.episodes_file()))
    return stats


def _assembly(shards: list[_Shard], episodes: list[AssembledEpisode], created: datetime) -> dict[str, Any]:
    return {
        "schema": "ceres-dataset-assembly",
        "version": 1,
        "created_at": rfc3339(created),
        "episodes": [
            {
                "episode_index": episode.episode_index,
                "source_episode_index": episode.source_episode_index,
                "episode_id": episode.episode_id,
                "source_receipt_sha256": shard.receipt_sha256,
            }
            for shard, episode in zip(shards, episodes, strict=True)
        ],
    }


def _dataset_receipt(
    stage: Path, total_episodes: int, created: datetime, known: dict[str, tuple[str, int]]
) -> dict[str, Any]:
    return {
        "schema": "ceres-dataset-receipt",
        "version": 1,
        "created_at": rfc3339(created),
        "total_episodes": total_episodes,
        "artefacts": build_artefacts(stage, exclude=DATASET_RECEIPT, known=known),
    }


def _copy(source: Path, target: Path) -> tuple[str, int]:
    """Copy a file, hashing it on the way; returns its digest and size."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return file_digest(source, target)


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, value)
