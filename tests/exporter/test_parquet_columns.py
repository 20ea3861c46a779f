"""Replacing columns of a parquet file by splicing column chunks (exporter/parquet_columns.py)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.parquet_columns import footer_bytes, read_footer, replace_columns


def _file(rows: int = 2500, row_group: int = 1000, **options) -> bytes:
    rng = np.random.default_rng(3)
    state = pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(rows * 4).astype(np.float32)), 4)
    table = pa.table({
        "observation.state": state,
        "frame_index": pa.array(np.arange(rows), pa.int64()),
        "episode_index": pa.array(np.zeros(rows, np.int64)),
        "index": pa.array(np.arange(rows), pa.int64()),
        "note": pa.array([f"row {i % 7}" for i in range(rows)]),
        "gap": pa.array(np.arange(rows) % 5 == 0),
    })
    out = pa.BufferOutputStream()
    pq.write_table(table, out, row_group_size=row_group, **options)
    return out.getvalue().to_pybytes()


def test_footer_reads_and_writes_back_byte_for_byte():
    data = _file()
    metadata, start = read_footer(data)
    assert footer_bytes(metadata) == data[start:-8]


def test_replaced_columns_and_untouched_chunks():
    source = _file()
    rows = 2500
    new = {"episode_index": pa.array(np.full(rows, 7), pa.int64()),
           "index": pa.array(np.arange(rows) + 900, pa.int64())}
    spliced = replace_columns(source, new)
    assert spliced is not None
    before = pq.read_table(pa.BufferReader(source))
    after = pq.ParquetFile(pa.BufferReader(spliced))
    assert after.schema_arrow.equals(before.schema, check_metadata=True)
    assert after.num_row_groups == 3
    expected = before
    for name, values in new.items():
        i = expected.schema.get_field_index(name)
        expected = expected.set_column(i, expected.schema.field(i), values)
    assert after.read().equals(expected)
    for group in range(3):  # every row group reads alone, with the new columns' own statistics
        assert after.read_row_group(group).equals(expected.slice(1000 * group, 1000))
        stats = after.metadata.row_group(group).column(3).statistics
        assert (stats.min, stats.max) == (900 + 1000 * group, 900 + min(2500, 1000 * (group + 1)) - 1)
    # the other columns' chunks are the source's bytes
    original = pq.ParquetFile(pa.BufferReader(source)).metadata
    for group in range(3):
        for column in (0, 1, 4, 5):
            old, new_chunk = original.row_group(group).column(column), after.metadata.row_group(group).column(column)
            start_old = old.dictionary_page_offset or old.data_page_offset
            start_new = new_chunk.dictionary_page_offset or new_chunk.data_page_offset
            size = old.total_compressed_size
            assert spliced[start_new : start_new + size] == source[start_old : start_old + size]


@pytest.mark.parametrize("options", [{"write_page_index": True}, {"compression": "zstd", "write_statistics": False}])
def test_files_it_cannot_or_can_splice(options):
    source = _file(**options)
    new = {"index": pa.array(np.arange(2500) + 1, pa.int64())}
    spliced = replace_columns(source, new)
    if options.get("write_page_index"):
        assert spliced is None  # page indexes would point at the old chunks: the caller rewrites the file
    else:
        assert pq.read_table(pa.BufferReader(spliced)).column("index").to_pylist() == list(range(1, 2501))


def test_not_parquet_is_refused():
    assert replace_columns(b"PAR1 not really", {}) is None
