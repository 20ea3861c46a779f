"""The study dataset's task table, ``meta/tasks.parquet`` (shard.md section 5): append-only."""

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from exporter.errors import SourceError


def read_tasks(path: Path) -> list[str]:
    """Task texts by task_index from a tasks.parquet (the task text is the pandas index ``task``)."""
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise SourceError(f"unreadable task table: {exc}", path=str(path)) from None
    if frame.index.name != "task" or list(frame.columns) != ["task_index"]:
        raise SourceError("a task table has the index 'task' and the column 'task_index'", path=str(path))
    if frame["task_index"].tolist() != list(range(len(frame))):
        raise SourceError("task_index must be 0, 1, 2, ... in row order", path=str(path))
    return [str(task) for task in frame.index]


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
    index = pd.Index(tasks, name="task", dtype=object)
    frame = pd.DataFrame({"task_index": np.arange(len(tasks), dtype=np.int64)}, index=index)
    frame.to_parquet(path)
