"""Replacing columns of a parquet file by splicing column chunks (exporter/parquet_columns.py)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.parquet_columns import float_list_values, footer_bytes, read_footer, replace_columns


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


def _vectors(state: pa.Array, **options) -> bytes:
    out = pa.BufferOutputStream()
    pq.write_table(pa.table({"observation.state": state, "frame_index": pa.array(np.arange(len(state)))}), out,
                   **options)
    return out.getvalue().to_pybytes()


def _decoded(data: bytes, width: int) -> np.ndarray | None:
    leaf = pq.ParquetFile(pa.BufferReader(data)).metadata.schema.column(0)
    return float_list_values(data, 0, width, max_definition=leaf.max_definition_level,
                             max_repetition=leaf.max_repetition_level)


@pytest.mark.parametrize("options", [
    {},  # dictionary pages, snappy
    {"use_dictionary": False, "compression": "none"},  # plain pages, uncompressed
    {"dictionary_pagesize_limit": 4096, "data_page_size": 8192, "compression": "zstd"},  # dictionary, then plain
    {"row_group_size": 333, "data_page_size": 1000},  # several row groups and pages
])
@pytest.mark.parametrize("width", [410, 3, 1])
def test_float_vectors_decoded_from_pages_as_pyarrow_reads_them(options, width):
    rng = np.random.default_rng(5)
    values = rng.standard_normal(1000 * width).astype(np.float32)
    values[::7] = 0.5  # repeated values, so runs of equal dictionary indices
    values[100:400] = 1.0
    values[3] = np.nan
    data = _vectors(pa.FixedSizeListArray.from_arrays(pa.array(values), width), **options)
    decoded = _decoded(data, width)
    assert decoded is not None and decoded.shape == (1000, width)
    assert decoded.tobytes() == values.tobytes()


def test_float_vectors_it_leaves_to_pyarrow():
    values = pa.array(np.arange(40, dtype=np.float32))
    with_null = pa.array(np.arange(40, dtype=np.float32), mask=np.arange(40) == 5)
    assert _decoded(_vectors(pa.FixedSizeListArray.from_arrays(with_null, 4)), 4) is None  # a null value
    null_list = pa.FixedSizeListArray.from_arrays(values, 4, mask=pa.array(np.arange(10) == 2))
    assert _decoded(_vectors(null_list), 4) is None  # a null list
    assert _decoded(_vectors(pa.FixedSizeListArray.from_arrays(values, 4)), 5) is None  # another length
    lists = pa.ListArray.from_arrays(pa.array([0, 4, 7, 12, 16, 20, 24, 28, 32, 36, 40], pa.int32()), values)
    assert _decoded(_vectors(lists), 4) is None  # lists of other lengths among them
    doubles = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(40, dtype=np.float64)), 4)
    assert _decoded(_vectors(doubles), 4) is None
    v2 = _vectors(pa.FixedSizeListArray.from_arrays(values, 4), data_page_version="2.0")
    assert _decoded(v2, 4) is None  # version 2 data pages
