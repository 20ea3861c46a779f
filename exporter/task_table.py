"""The study dataset's task table, ``meta/tasks.parquet`` (shard.md section 5): append-only."""

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from exporter.arrow import from_values
from exporter.errors import SourceError


def read_tasks(path: Path) -> list[str]:
    """Task texts by task_index from a tasks.parquet (the task text is the pandas index ``task``).

    Read with pyarrow and its pandas metadata, not pandas itself: pandas takes longer to import than
    assembling a short dataset takes, and the table is what pandas would make of the same file."""
    try:
        table = pq.ParquetFile(path).read()  # read_table would import pyarrow.dataset and pandas
        meta = table.schema.pandas_metadata or {}
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise SourceError(f"unreadable task table: {exc}", path=str(path)) from None
    index_columns = meta.get("index_columns") or []
    names = {c.get("field_name"): c.get("name") for c in meta.get("columns") or [] if isinstance(c, dict)}
    index = index_columns[0] if len(index_columns) == 1 and isinstance(index_columns[0], str) else None
    columns = [name for name in table.column_names if name not in index_columns]
    if index is None or names.get(index) != "task" or index not in table.column_names or columns != ["task_index"]:
        raise SourceError("a task table has the index 'task' and the column 'task_index'", path=str(path))
    if table.column("task_index").to_pylist() != list(range(table.num_rows)):
        raise SourceError("task_index must be 0, 1, 2, ... in row order", path=str(path))
    return [str(task) for task in table.column(index).to_pylist()]


def extend_tasks(tasks: list[str], texts: Iterable[str]) -> list[str]:
    """The table with every new text appended in first-use order; existing indices never change."""
    extended = list(tasks)
    known = set(extended)
    if len(known) != len(extended) or not all(isinstance(t, str) and t for t in extended):
        raise SourceError("a task table holds distinct, non-empty task texts", path="tasks")
    for text in texts:
        if text not in known:
            known.add(text)
            extended.append(text)
    return extended


@cache
def _pandas_metadata() -> bytes:
    """The schema metadata pandas' ``to_parquet`` (through pyarrow) gives the task table's data frame."""
    from importlib.metadata import version  # here: 13 ms of start-up for commands that only read task tables

    pandas_version = version("pandas")
    return json.dumps(
        {
            "index_columns": ["task"],
            "column_indexes": [
                {
                    "name": None,
                    "field_name": None,
                    "pandas_type": "unicode",
                    # the column labels' dtype: pandas 3 has a string dtype, earlier versions object
                    "numpy_type": "str" if int(pandas_version.split(".")[0]) >= 3 else "object",
                    "metadata": {"encoding": "UTF-8"},
                }
            ],
            "columns": [
                {
                    "name": "task_index",
                    "field_name": "task_index",
                    "pandas_type": "int64",
                    "numpy_type": "int64",
                    "metadata": None,
                },
                {
                    "name": "task",
                    "field_name": "task",
                    "pandas_type": "unicode",
                    "numpy_type": "object",
                    "metadata": None,
                },
            ],
            "attributes": {},
            "creator": {"library": "pyarrow", "version": pa.__version__},
            "pandas_version": pandas_version,
        }
    ).encode("utf8")


def write_tasks(path: Path, tasks: list[str]) -> None:
    """The table as pandas writes a data frame of ``task_index`` indexed by ``task`` (what LeRobot reads
    with pandas), byte for byte, without importing pandas (tests compare it with pandas' own writer)."""
    table = pa.table(
        {
            "task_index": from_values(np.arange(len(tasks), dtype=np.int64), pa.int64()),
            "task": from_values(list(tasks), pa.string()),
        }
    )
    pq.write_table(table.replace_schema_metadata({b"pandas": _pandas_metadata()}), path, compression="snappy")
