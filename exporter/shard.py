"""Write one immutable LeRobotDataset v3 episode shard (shard.md), staged next to OUT_DIR then renamed."""

import contextlib
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from exporter import forked
from exporter.arrow import from_values, numpy_array
from exporter.errors import ShardExistsError, SourceError
from exporter.features import STATE_DIM, dictionary_columns, feature_table, video_key
from exporter.jsonfile import json_bytes
from exporter.layout import episode_folder
from exporter.modes import publish_modes
from exporter.receipt import bytes_digest, file_digest, verify_shard, write_receipt
from exporter.rows import Rows, build_rows
from exporter.source import STUDY_KEYS, Capture, check_study_block, open_source, parse_capture, read_capture
from exporter.stats import STAT_NAMES, ColumnScratch, feature_stats
from exporter.task_table import extend_tasks, write_tasks
from exporter.timestamps import rfc3339
from exporter.video import VideoResult, export_video, video_stats

CHUNKS_SIZE = 1000
MAX_INDEX = 2**53  # episode and global frame indices stay exact in JSON readers that use doubles
# Data parquet row groups: the states of one group are in memory at a time (one group for an hour of
# state took ~300 MB).
ROW_GROUP_ROWS = 16384
# A camera file at least this long is made into the episode video in a forked process (forked.Job).
VIDEO_PROCESS_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ExportResult:
    shard_dir: Path
    rows: int
    gap_rows: int
    retained_segments: int
    dropped_retries: int
    video_method: str | None
    tasks: list[str]  # the extended task table
    receipt_sha256: str
    warnings: list[str]

    def summary(self) -> str:
        return (
            f"{self.shard_dir.name}: {self.rows} rows, {self.gap_rows} gap rows, "
            f"{self.retained_segments} retained segments, {self.dropped_retries} dropped retries, "
            f"video {self.video_method or 'none'}"
        )


def _chunk_file(episode_index: int) -> str:
    return f"chunk-{episode_index // CHUNKS_SIZE:03d}/file-{episode_index % CHUNKS_SIZE:03d}"


def _study_block(capture: Capture, study: dict[str, Any] | None) -> dict[str, Any]:
    """The portal's registry values replace the recorder's claims wholesale when given."""
    if study is None:
        return {**capture.study_claims, "raw_audio_retained": capture.audio_in_source}
    if not isinstance(study, dict):
        raise SourceError("the study block must be a JSON object", path="study")
    unknown = set(study) - {*STUDY_KEYS, "raw_audio_retained"}
    if unknown:
        raise SourceError(f"unknown study keys: {', '.join(sorted(unknown))}", path="study")
    retained = study.get("raw_audio_retained", capture.audio_in_source)
    if not isinstance(retained, bool):
        raise SourceError("'raw_audio_retained' must be a boolean", path="study")
    return {**check_study_block(study, "study"), "raw_audio_retained": retained}


def _data_table(rows: Rows, state: np.ndarray, start: int, fps: int, episode_index: int, from_index: int) -> pa.Table:
    """The data table of rows start .. start + len(state) - 1."""
    stop = start + len(state)
    frame_index = np.arange(start, stop, dtype=np.int64)
    action = rows.action[start:stop]
    columns = {
        "observation.state": pa.FixedSizeListArray.from_arrays(numpy_array(state.reshape(-1)), state.shape[1]),
        "action": pa.FixedSizeListArray.from_arrays(numpy_array(action.reshape(-1)), action.shape[1]),
        "timestamp": numpy_array((frame_index / fps).astype(np.float32)),
        "frame_index": numpy_array(frame_index),
        "episode_index": numpy_array(np.full(stop - start, episode_index, dtype=np.int64)),
        "index": numpy_array(frame_index + from_index),
        "task_index": numpy_array(rows.task_index[start:stop]),
        "ceres.source_frame_index": numpy_array(rows.source_slot[start:stop]),
        "ceres.source_timestamp": numpy_array(rows.source_time[start:stop]),
        "ceres.source_gap": numpy_array(rows.gap[start:stop]),
    }
    return pa.table(columns)


def _write_data(
    rows: Rows, path: Path, fps: int, episode_index: int, from_index: int
) -> dict[str, dict[str, list[Any]]]:
    """Write the data parquet a row group at a time and return the statistics of its columns. The
    states pass through a column-major scratch file, from which their statistics are computed one
    dimension at a time, so memory holds one row group, never the episode's states."""
    n = len(rows)
    frame_index = np.arange(n, dtype=np.int64)
    writer = None
    group = np.empty((min(n, ROW_GROUP_ROWS), STATE_DIM), dtype=np.float32)  # one buffer for every group
    with ColumnScratch(n, STATE_DIM, folder=path.parent) as states:
        try:
            for start in range(0, n, ROW_GROUP_ROWS):
                stop = min(n, start + ROW_GROUP_ROWS)
                state = rows.state(start, stop, group[: stop - start])
                states.write(start, state)
                table = _data_table(rows, state, start, fps, episode_index, from_index)
                if writer is None:
                    writer = pq.ParquetWriter(path, table.schema, use_dictionary=dictionary_columns(table.schema.names))
                writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
                del state, table
                pa.default_memory_pool().release_unused()
        finally:
            if writer is not None:
                writer.close()
        state_stats = states.stats()
    return {
        "observation.state": state_stats,
        "action": feature_stats(rows.action),
        "timestamp": feature_stats((frame_index / fps).astype(np.float32)),
        "frame_index": feature_stats(frame_index),
        "episode_index": feature_stats(np.full(n, episode_index, dtype=np.int64)),
        "index": feature_stats(frame_index + from_index),
        "task_index": feature_stats(rows.task_index),
        "ceres.source_frame_index": feature_stats(rows.source_slot),
        "ceres.source_timestamp": feature_stats(rows.source_time),
        "ceres.source_gap": feature_stats(rows.gap),
    }


def _episodes_table(
    *,
    episode_index: int,
    tasks: list[str],
    length: int,
    from_index: int,
    fps: int,
    video: str | None,
    stats: dict[str, dict[str, list[Any]]],
) -> pa.Table:
    chunk, file = divmod(episode_index, CHUNKS_SIZE)
    int64 = pa.int64()
    columns: dict[str, tuple[Any, pa.DataType]] = {
        "episode_index": (episode_index, int64),
        "tasks": (tasks, pa.list_(pa.string())),
        "length": (length, int64),
        "data/chunk_index": (chunk, int64),
        "data/file_index": (file, int64),
        "dataset_from_index": (from_index, int64),
        "dataset_to_index": (from_index + length, int64),
    }
    if video is not None:
        columns[f"videos/{video}/chunk_index"] = (chunk, int64)
        columns[f"videos/{video}/file_index"] = (file, int64)
        columns[f"videos/{video}/from_timestamp"] = (0.0, pa.float64())
        columns[f"videos/{video}/to_timestamp"] = (length / fps, pa.float64())
    for feature, feature_stats_ in stats.items():
        values_type = pa.list_(pa.list_(pa.list_(pa.float64()))) if feature == video else pa.list_(pa.float64())
        for stat in STAT_NAMES:
            values = feature_stats_[stat]
            columns[f"stats/{feature}/{stat}"] = (values, pa.list_(int64) if stat == "count" else values_type)
    columns["meta/episodes/chunk_index"] = (chunk, int64)
    columns["meta/episodes/file_index"] = (file, int64)
    return pa.table({name: from_values([value], kind) for name, (value, kind) in columns.items()})


def _video_dimensions(path: Path) -> tuple[int, int]:
    with av.open(str(path)) as media:
        stream = media.streams.video[0]
        return stream.height, stream.width


def _write_video(
    capture: Capture, camera_path: Path, rows: Rows, mp4: Path
) -> tuple[VideoResult, dict[str, list[Any]], tuple[int, int], tuple[str, int]]:
    """The episode video, its statistics, its (height, width) and its SHA-256 and size, as written (where the
    video is made in a process of its own, its digest is taken there too, beside the data table)."""
    mp4.parent.mkdir(parents=True)
    result = export_video(
        camera_path,
        capture.camera_probe,
        capture.camera.first_frame_source_time,
        rows.slot_time,
        rows.consecutive,
        capture.rate_hz,
        mp4,
    )
    # the digest is read on a thread while the sampled frames decode (both release the GIL): at the end of an
    # export they are all that is left, and the second core would wait
    with ThreadPoolExecutor(max_workers=1) as pool:
        digest = pool.submit(file_digest, mp4)
        stats = video_stats(mp4)
        return result, stats, _video_dimensions(mp4), digest.result()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _write_shard(
    staging: Path,
    capture: Capture,
    camera_path: Path | None,
    rows: Rows,
    *,
    episode_index: int,
    from_index: int,
    tasks: list[str],
    study: dict[str, Any],
    exported_at: str,
) -> tuple[str | None, list[str], dict[str, tuple[str, int]]]:
    """Write the shard's files into ``staging``; returns the video's method, the warnings, and the digests
    (SHA-256 and size, by path in the shard) of the files already hashed as they were made."""
    fps = capture.rate_hz
    name = _chunk_file(episode_index)
    warnings = list(capture.warnings)
    video = video_result = None
    digests: dict[str, tuple[str, int]] = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        video_job = None
        if capture.camera is not None:
            video = video_key(capture.camera.selected)
            mp4 = staging / "videos" / video / f"{name}.mp4"
            # Beside the data table: from VIDEO_PROCESS_BYTES of camera file on in a forked process (the
            # remux's loop over the packets and the statistics then never wait for each other's interpreter
            # lock: an hour's remux took 1.3-2.3 s on a thread beside the data table, 0.7 s alone), else on a
            # thread (PyAV, pyarrow and numpy release the GIL for their heavy work).
            video_job = forked.Job(
                partial(_write_video, capture, camera_path, rows, mp4),
                fork=camera_path.stat().st_size >= VIDEO_PROCESS_BYTES,
                pool=pool,
                clean=partial(shutil.rmtree, mp4.parent, ignore_errors=True),
            )
        try:
            data_path = staging / "data" / f"{name}.parquet"
            data_path.parent.mkdir(parents=True)
            data_stats = _write_data(rows, data_path, fps, episode_index, from_index)
            if video_job is not None:
                video_result, video_stats_, (height, width), mp4_digest = video_job.result()
                digests[mp4.relative_to(staging).as_posix()] = mp4_digest
        finally:
            if video_job is not None:
                video_job.stop()
    if video_result is not None and video_result.misaligned_rows:
        warnings.append(f"{video_result.misaligned_rows} rows have no camera frame within half a slot period")
    stats: dict[str, dict[str, list[Any]]] = {}
    for feature, values in data_stats.items():
        stats[feature] = values
        if feature == "action" and video is not None:  # the video feature follows action (table order)
            stats[video] = video_stats_

    episode_tasks = list(dict.fromkeys(s.segment.task for s in rows.segments))
    episodes = _episodes_table(
        episode_index=episode_index,
        tasks=episode_tasks,
        length=len(rows),
        from_index=from_index,
        fps=fps,
        video=video,
        stats=stats,
    )
    episodes_path = staging / "meta" / "episodes" / f"{name}.parquet"
    episodes_path.parent.mkdir(parents=True)
    pq.write_table(episodes, episodes_path)
    write_tasks(staging / "meta" / "tasks.parquet", tasks)
    info = {
        "codebase_version": "v3.0",
        "robot_type": "ceres_webxr_hands",
        "total_episodes": 1,
        "total_frames": len(rows),
        "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": fps,
        "splits": {"train": f"{episode_index}:{episode_index + 1}"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": ("videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4" if video else None),
        "features": feature_table(fps, (video, height, width) if video else None),
    }
    _write(staging / "meta" / "info.json", json_bytes(info))
    _write(staging / "meta" / "stats.json", json_bytes(stats))

    spec = capture.task_specification
    if spec is not None:
        _write(staging / spec.path, spec.canonical)
    camera = capture.camera
    probe = capture.camera_probe
    metadata = {
        "schema": "ceres-episode-export-metadata",
        "version": 3,
        "episode_id": capture.capture_id,
        "episode_index": episode_index,
        "recorded_at": capture.recorded_at,
        "exported_at": exported_at,
        "camera": None
        if camera is None
        else {
            "selected": camera.selected,
            "width": probe.width,
            "height": probe.height,
            "frame_rate": probe.measured_frame_rate or camera.frame_rate,
            "characteristics": camera.characteristics,
        },
        "video": None
        if video_result is None
        else {"method": video_result.method, "misaligned_rows": video_result.misaligned_rows},
        "capture_device": capture.capture_device,
        "recorder_rate_hz": capture.rate_hz,
        "study": study,
        "calibration": capture.calibration,
        "segments": [
            {
                "cycle": s.segment.cycle,
                "repetition": s.segment.repetition,
                "take": s.segment.take,
                "task": s.segment.task,
                "task_index": s.task_index,
                "annotations": s.segment.annotations,
                "outcome": s.segment.outcome,
                "durable_frames": s.durable_frames,
                "gap_frames": s.gap_frames,
                "source_start_timestamp": float(rows.source_time[s.frame_from]),
                "source_end_timestamp": float(rows.source_time[s.frame_to - 1]),
                "frame_index_from": s.frame_from,
                "frame_index_to": s.frame_to,
            }
            for s in rows.segments
        ],
        "task_specification": None
        if spec is None
        else {"version": spec.version, "sha256": spec.sha256, "path": spec.path},
        "warnings": warnings,
    }
    _write(staging / "ceres" / "episode-metadata.json", json_bytes(metadata))
    return (video_result.method if video_result else None), warnings, digests


def export_shard(
    source: Path,
    out_dir: Path,
    *,
    episode_index: int = 0,
    from_index: int = 0,
    tasks: list[str] | None = None,
    study: dict[str, Any] | None = None,
    exported_at: datetime | None = None,
) -> ExportResult:
    """Export a capture source as ``out_dir/episode-NNNNNN/``; SourceError for bad input, nothing written."""
    for value, option in ((episode_index, "--episode-index"), (from_index, "--from-index")):
        if type(value) is not int or not 0 <= value <= MAX_INDEX:
            raise SourceError(f"must be an integer from 0 to {MAX_INDEX}", path=option)
    out_dir = Path(out_dir)
    target = out_dir / episode_folder(episode_index)
    if target.exists():
        raise ShardExistsError("already exists; shards are immutable", path=str(target))
    created_at = rfc3339(exported_at or datetime.now(UTC))
    with open_source(Path(source)) as container:
        capture = parse_capture(container)
        # the journal's states sit in scratch files until the data parquet is written
        with contextlib.closing(capture.journal.states):
            study_block = _study_block(capture, study)
            table = extend_tasks(tasks or [], capture.tasks)
            rows = build_rows(capture.journal, capture.rate_hz, {task: i for i, task in enumerate(table)})
            camera_path = container.local_path(capture.camera.media) if capture.camera else None
            try:
                out_dir.mkdir(parents=True, exist_ok=True)
                staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=out_dir))
            except OSError as exc:
                raise SourceError(f"cannot write the shard here: {exc.strerror}", path=str(out_dir)) from None
            try:
                video_method, warnings, digests = _write_shard(
                    staging,
                    capture,
                    camera_path,
                    rows,
                    episode_index=episode_index,
                    from_index=from_index,
                    tasks=table,
                    study=study_block,
                    exported_at=created_at,
                )
                receipt = write_receipt(
                    staging,
                    episode_id=capture.capture_id,
                    episode_index=episode_index,
                    created_at=created_at,
                    known=digests,
                )
                if target.exists():
                    raise ShardExistsError("already exists; shards are immutable", path=str(target))
                publish_modes(staging)
                os.rename(staging, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    shutil.rmtree(staging)
                raise
    return ExportResult(
        shard_dir=target,
        rows=len(rows),
        gap_rows=int(rows.gap.sum()),
        retained_segments=len(capture.retained_segments),
        dropped_retries=capture.dropped_retries,
        video_method=video_method,
        tasks=table,
        receipt_sha256=bytes_digest(receipt)[0],
        warnings=warnings,
    )


__all__ = ["ExportResult", "export_shard", "read_capture", "verify_shard"]
