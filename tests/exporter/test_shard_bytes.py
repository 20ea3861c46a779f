"""The shard does not change with the exporter's speed work: the same input gives the same bytes.

``data/shard-digests.json`` holds, for a corpus of generated camera-less captures, the SHA-256 of every
JSON file of the shard (the receipt aside: it holds the parquet files' byte digests) and of every
parquet file's content (its Arrow table in the IPC stream format, with its row-group sizes), as written
by the exporter before the journal was decoded by msgspec and the statistics were streamed. Parquet
files are pinned by content because their bytes name the pyarrow version that wrote them; within one
pyarrow build (the one named in the file) their bytes are pinned too. The data files' bytes were pinned
again when only their columns that repeat kept dictionary encoding (issue 26); their content did not move.
"""

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.generate import generate_capture
from exporter.receipt import RECEIPT
from exporter.shard import export_shard
from tests.exporter.conftest import standard_records, write_source

EXPORTED_AT = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
DIGESTS = Path(__file__).parent / "data" / "shard-digests.json"
# name -> generate_capture options (camera-less: video bytes depend on the FFmpeg/x264 build)
CORPUS: dict[str, dict] = {
    "aligned": {"seconds": 20, "seed": 1, "retries": 0},
    "retries": {"seconds": 20, "seed": 2, "retries": 3},
    "idle-between-segments": {"seconds": 20, "seed": 3, "retries": 1, "aligned": False},
    "two-row-groups": {"seconds": 75, "rate_hz": 240, "seed": 4, "retries": 1},
}


def content_digests(shard: Path) -> dict[str, str]:
    digests = {}
    for path in sorted(p for p in shard.rglob("*") if p.is_file()):
        name = path.relative_to(shard).as_posix()
        if name == RECEIPT:
            continue
        if path.suffix == ".parquet":
            sink = pa.BufferOutputStream()
            table = pq.read_table(path)
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            metadata = pq.read_metadata(path)
            groups = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
            content = sink.getvalue().to_pybytes() + json.dumps(groups).encode()
        else:
            content = path.read_bytes()
        digests[name] = hashlib.sha256(content).hexdigest()
    return digests


def parquet_byte_digests(shard: Path) -> dict[str, str]:
    return {
        path.relative_to(shard).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(shard.rglob("*.parquet"))
    }


def export_corpus(root: Path) -> dict[str, Any]:
    shards = {}
    for name, options in CORPUS.items():
        source = generate_capture(root / "captures" / name, camera="none", **options)
        shards[name] = export_shard(source, root / "shards" / name, exported_at=EXPORTED_AT).shard_dir
    source = write_source(root / "captures" / "hand-written", standard_records())
    shards["hand-written"] = export_shard(source, root / "shards" / "hand-written", exported_at=EXPORTED_AT).shard_dir
    return {
        "content": {name: content_digests(shard) for name, shard in shards.items()},
        "parquet_bytes": {
            "pyarrow": pa.__version__,
            "digests": {name: parquet_byte_digests(shard) for name, shard in shards.items()},
        },
    }


@pytest.mark.slow
def test_shards_keep_their_bytes(tmp_path: Path):
    exported = export_corpus(tmp_path)
    pinned = json.loads(DIGESTS.read_text(encoding="utf-8"))
    assert exported["content"] == pinned["content"]
    if exported["parquet_bytes"]["pyarrow"] == pinned["parquet_bytes"]["pyarrow"]:
        assert exported["parquet_bytes"] == pinned["parquet_bytes"]
