"""Arrow arrays built from their buffers (exporter/arrow.py) are what pyarrow's own conversions give, the
task table is what pandas writes, and an export never imports pandas (0.4 s of CPU per export)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from exporter.arrow import from_values, numpy_array, to_numpy
from exporter.task_table import read_tasks, write_tasks

ROOT = Path(__file__).resolve().parents[2]

NUMPY_CASES = [
    np.arange(7, dtype=np.float32),
    np.linspace(-1, 1, 9),
    np.arange(12, dtype=np.int64)[::3],  # not contiguous
    np.array([True, False, True, True, False, False, True, False, True]),
    np.zeros(0, dtype=np.int64),
]
VALUE_CASES = [
    ([3], pa.int64()),
    ([0.25], pa.float64()),
    ([["Pick up the red cup", "é ü 漢字 🙂", ""]], pa.list_(pa.string())),
    ([[1.0, 2.5, -0.0]], pa.list_(pa.float64())),
    ([[18000]], pa.list_(pa.int64())),
    ([[[[0.1]], [[0.2]], [[0.3]]]], pa.list_(pa.list_(pa.list_(pa.float64())))),
    ([[]], pa.list_(pa.float64())),
    ([None, 2], pa.int64()),  # nulls take pyarrow's own conversion
]


@pytest.mark.parametrize("values", NUMPY_CASES, ids=lambda v: f"{v.dtype}-{v.size}")
def test_numpy_arrays_equal_pyarrows_conversion(values):
    built, expected = numpy_array(values), pa.array(values)
    built.validate(full=True)
    assert built.type == expected.type and built.equals(expected)
    assert built.null_count == expected.null_count == 0 and built.buffers()[0] is None
    assert np.array_equal(to_numpy(built), values)


@pytest.mark.parametrize(("values", "kind"), VALUE_CASES, ids=lambda v: str(v)[:30])
def test_values_equal_pyarrows_conversion(values, kind):
    built, expected = from_values(values, kind), pa.array(values, type=kind)
    built.validate(full=True)
    assert built.type == expected.type and built.equals(expected)


@pytest.mark.parametrize(
    "tasks",
    [["Pick up the red cup"], ["a", "é ü 漢字 🙂", "x" * 5000, "tab\tnew\nline"], [f"task {i}" for i in range(2000)]],
    ids=["one", "unicode", "many"],
)
def test_task_table_is_byte_for_byte_what_pandas_writes(tasks, tmp_path: Path):
    ours, theirs = tmp_path / "ours.parquet", tmp_path / "pandas.parquet"
    write_tasks(ours, tasks)
    index = pd.Index(tasks, name="task", dtype=object)
    pd.DataFrame({"task_index": np.arange(len(tasks), dtype=np.int64)}, index=index).to_parquet(theirs)
    assert ours.read_bytes() == theirs.read_bytes()
    assert read_tasks(ours) == tasks
    assert pd.read_parquet(ours).index.tolist() == tasks


def test_an_export_does_not_import_pandas(source: Path, tmp_path: Path):
    script = (
        "import sys\n"
        "from exporter.cli import main\n"
        "code = main(['export', sys.argv[1], sys.argv[2]])\n"
        "assert 'pandas' not in sys.modules, 'the export imported pandas'\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(source), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
