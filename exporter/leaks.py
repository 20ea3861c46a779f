"""The raw identifiers a capture source holds (``capture_identifiers`` reads them from its ``capture.json``), and
the search for them in an exported shard.

A shard never holds a value the capture source held under ``device_id`` or ``user_agent`` (shard.md
section 8). ``find_leaks`` checks that on the shard's bytes, not on what the exporter meant to write:
JSON files byte for byte (each value as written in JSON, and the two key names), parquet files through
their decoded text (every string column and the key-value metadata), the video's container and stream
metadata tags. Values shorter than ``MIN_VALUE_BYTES`` (such as a browser's ``default`` camera) identify
nothing and would match by chance, so they are not searched for.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import pyarrow as pa
import pyarrow.parquet as pq

from exporter.journal import DROPPED_KEYS
from exporter.receipt import folder_files
from exporter.source import MANIFEST, parse_json

MIN_VALUE_BYTES = 8


def raw_identifiers(capture: Any, where: str = "") -> dict[str, str]:
    """Every text value held under a ``device_id`` or ``user_agent`` key at any depth of ``capture`` (the
    parsed ``capture.json``), mapped to the key path it was found at (``camera.device_id``)."""
    found: dict[str, str] = {}
    if isinstance(capture, dict):
        for key, value in capture.items():
            path = f"{where}.{key}" if where else str(key)
            if key in DROPPED_KEYS:
                for text in _texts(value):
                    found.setdefault(text, path)
            else:
                for text, origin in raw_identifiers(value, path).items():
                    found.setdefault(text, origin)
    elif isinstance(capture, list):
        for number, value in enumerate(capture):
            for text, origin in raw_identifiers(value, f"{where}[{number}]").items():
                found.setdefault(text, origin)
    return found


def capture_identifiers(capture_json: Path) -> dict[str, str]:
    """``raw_identifiers`` of a capture source's ``capture.json`` file, read as the source reader reads it
    (``SourceError`` when it is not such JSON)."""
    return raw_identifiers(parse_json(Path(capture_json).read_bytes(), MANIFEST))


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def _parquet_text(path: Path) -> str:
    """Column names, key-value metadata and every string value of a parquet file, joined."""
    parquet = pq.ParquetFile(path)
    schema = parquet.schema_arrow
    parts = list(schema.names)
    for key, value in (schema.metadata or {}).items():
        parts += [key.decode("utf-8", "replace"), value.decode("utf-8", "replace")]

    def textual(kind: pa.DataType) -> bool:
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return True
        return (pa.types.is_list(kind) or pa.types.is_large_list(kind)
                or pa.types.is_fixed_size_list(kind)) and textual(kind.value_type)

    columns = [field.name for field in schema if textual(field.type)]
    if columns:
        table = parquet.read(columns=columns)
        for column in table.columns:
            parts += [json.dumps(value, ensure_ascii=False) for value in column.to_pylist()]
    return "\n".join(parts)


def _video_text(path: Path) -> str:
    with av.open(str(path)) as container:
        tags = [container.metadata, *(stream.metadata for stream in container.streams)]
    return "\n".join(f"{key}={value}" for metadata in tags for key, value in metadata.items())


def find_leaks(shard_dir: Path, identifiers: dict[str, str]) -> list[str]:
    """Where the shard holds a raw identifier (``identifiers`` from ``raw_identifiers``) or one of the two
    key names; empty when it holds none. Problems name the file and the key path, never the value."""
    shard_dir = Path(shard_dir)
    needles = {value: origin for value, origin in identifiers.items() if len(value.encode()) >= MIN_VALUE_BYTES}
    problems = []
    for name in folder_files(shard_dir):
        path = shard_dir / name
        if name.endswith(".json"):
            data = path.read_bytes()
            for key in sorted(DROPPED_KEYS):
                if f'"{key}"'.encode() in data:
                    problems.append(f"{name}: holds the key {key!r}")
            found = [origin for value, origin in needles.items()
                     if value.encode() in data or json.dumps(value, ensure_ascii=False)[1:-1].encode() in data]
        elif name.endswith(".parquet"):
            text = _parquet_text(path)
            found = [origin for value, origin in needles.items() if value in text]
        elif name.endswith(".mp4"):
            text = _video_text(path)
            found = [origin for value, origin in needles.items() if value in text]
        else:
            found = [origin for value, origin in needles.items() if value.encode() in path.read_bytes()]
        problems += [f"{name}: holds the capture source's raw {origin}" for origin in sorted(set(found))]
    return problems
