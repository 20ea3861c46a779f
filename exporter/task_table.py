"""The study dataset's task table, ``meta/tasks.parquet`` (shard.md section 5): append-only."""

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

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


def write_tasks(path: Path, tasks: list[str]) -> None:
    import numpy as np
    import pandas as pd  # only where a table is written: reading it needs neither

    index = pd.Index(tasks, name="task", dtype=object)
    frame = pd.DataFrame({"task_index": np.arange(len(tasks), dtype=np.int64)}, index=index)
    frame.to_parquet(path)
