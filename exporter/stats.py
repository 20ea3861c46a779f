"""Feature statistics (shard.md section 6), the one place they are computed for shards, assembled
datasets and videos: min, max, mean, population std, count and numpy's default (linear) quantiles,
in float64 (booleans as 0/1), exact over every row. An assembled dataset's camera statistics are the
shards' sampled-frame statistics pooled (``pooled_image_stats``).

A vector feature is taken one dimension at a time, so its memory is one column, not the whole array:
a long episode writes its states to a column-major scratch file (``ColumnScratch``) as they are
built, and each dimension is read back from it. The results are bit for bit those of reducing the
whole (rows, dimensions) array along its first axis: numpy sums the columns of a 2-D array row after
row (``np.add.accumulate`` gives the same sum) but a 1-D array pairwise, so a vector feature's
dimension is summed sequentially and a scalar feature pairwise.

A vector feature's dimensions are reduced a block at a time (``block_stats``): the block's columns are
summed as the columns of a 2-D array (the same sequential sums, many columns per instruction) and its
order statistics are selected in the stored dtype (float32 for states: converting to float64 is exact and
keeps the order), then interpolated with numpy's own arithmetic, so the figures are still bit for bit
those of ``np.mean``, ``np.std`` and ``np.quantile`` over the whole array, at about a third of the CPU.
For float32 blocks the sums and the order statistics come from ``exporter/_block_stats.c`` where it was
built (the same sums in the same order; the order statistics found by counting, the block not moved):
about half the CPU again. Rows it cannot answer as numpy would are left to numpy.
"""

import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import numpy as np

try:
    from exporter import _block_stats
except ImportError:  # not compiled (no C compiler where the project was installed): numpy computes the same
    _block_stats = None

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
STAT_NAMES = ("min", "max", "mean", "std", "count", *QUANTILES)
_QUANTILE_LEVELS = list(QUANTILES.values())
_TRANSPOSE_ROWS = 4096
_MEMORY_TRANSPOSE_ROWS = 256
_THREADS = min(2, os.cpu_count() or 1)
# The compiled order statistics and moments of float32 rows (exporter/_block_stats.c), None where it was not
# built; tests switch it off to compare it with numpy.
_COMPILED: Any = _block_stats


def dimension_stats(values: np.ndarray, *, vector: bool) -> list[float]:
    """min, max, mean, std and the quantiles (no count) of one dimension, as floats. ``vector``: the
    dimension belongs to a vector feature (summed sequentially, as numpy sums a 2-D array's columns)."""
    values = np.asarray(values, dtype=np.float64)
    if vector:
        mean = np.add.accumulate(values)[-1] / len(values)
        deviations = values - mean
        std = np.sqrt(np.add.accumulate(deviations * deviations)[-1] / len(values))
    else:
        mean, std = values.mean(), values.std()
    extremes = [values.min(), values.max(), mean, std]
    if np.isnan(extremes[0]):  # numpy's own rules for NaN
        quantiles = np.quantile(values, _QUANTILE_LEVELS)
    else:  # the same figures without np.quantile's overhead (its np.unique imports numpy.ma)
        quantiles = _block_quantiles(values.reshape(1, -1).copy())[:, 0]
    return [float(v) for v in (*extremes, *quantiles)]


def block_stats(block: np.ndarray) -> list[list[float]]:
    """``dimension_stats(block[d], vector=True)`` of every row ``d`` of ``block`` (dimensions, rows), bit for
    bit; ``block`` (float32 or float64, C-contiguous) is reordered in place."""
    dimensions, count = block.shape
    if dimensions < 2:  # a (rows, 1) array is summed pairwise, not row after row
        return [dimension_stats(block[d], vector=True) for d in range(dimensions)]
    lowest, highest = block.min(axis=1), block.max(axis=1)
    if np.isnan(lowest).any():  # numpy's NaN rules for quantiles: left to it
        return [dimension_stats(block[d], vector=True) for d in range(dimensions)]
    if _COMPILED is not None and block.dtype == np.float32 and block.flags.c_contiguous:
        mean, std = np.empty(dimensions), np.empty(dimensions)
        _COMPILED.moments(block, mean, std)  # the same sums, bit for bit, without the float64 copy
    else:
        rows = np.empty((count, dimensions), dtype=np.float64)
        rows[...] = block.T  # exact: every float32 is a float64
        mean = rows.sum(axis=0) / count  # columns of a C-ordered 2-D array: summed row after row
        rows -= mean
        rows *= rows
        std = np.sqrt(rows.sum(axis=0) / count)
        del rows
    quantiles = _block_quantiles(block)
    extremes = [lowest.astype(np.float64), highest.astype(np.float64), mean, std]
    return [[float(v) for v in column] for column in zip(*extremes, *quantiles, strict=True)]


def _block_quantiles(block: np.ndarray) -> np.ndarray:
    """``np.quantile(values, levels)`` (linear) of each row of ``block``, shaped (levels, rows): numpy's
    indices, gamma and interpolation, on order statistics selected in place in the block's own dtype."""
    count = block.shape[1]
    virtual = (count - 1) * np.asanyarray(_QUANTILE_LEVELS)
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= count - 1
    previous[above] = -1
    following[above] = -1
    previous, following = previous.astype(np.intp), following.astype(np.intp)
    # (np.unique would import numpy.ma)
    kth = sorted({0, count - 1, *(previous % count).tolist(), *(following % count).tolist()})
    selected = _order_statistics(block, kth)
    where = {position: index for index, position in enumerate(kth)}
    low = selected[:, [where[p % count] for p in previous.tolist()]].T.astype(np.float64)
    high = selected[:, [where[p % count] for p in following.tolist()]].T.astype(np.float64)
    gamma = np.asanyarray(virtual - previous, dtype=virtual.dtype).reshape(-1, 1)
    # numpy's _lerp
    difference = high - low
    result = np.add(low, difference * gamma)
    np.subtract(high, difference * (1 - gamma), out=result, where=gamma >= 0.5, casting="unsafe",
                dtype=type(result.dtype))
    return result


def _order_statistics(block: np.ndarray, kth: list[int]) -> np.ndarray:
    """What sorting each row of ``block`` would put at the sorted positions ``kth``, shaped (rows, len(kth)):
    selected by the compiled selection for float32 (``block`` left as it is) but for the rows it leaves to
    numpy, else by numpy's partition in place."""
    if _COMPILED is not None and block.dtype == np.float32 and block.flags.c_contiguous and block.shape[1] < 2**32:
        selected = np.empty((block.shape[0], len(kth)), dtype=np.float32)
        for row in _COMPILED.select(block, tuple(kth), selected):  # a NaN, or -0.0 and +0.0 where a zero is taken
            block[row].partition(kth)
            selected[row] = block[row, kth]
        return selected
    block.partition(kth, axis=1)
    return block[:, kth]


def collect(per_dimension: Iterable[list[float]], count: int) -> dict[str, list[Any]]:
    """The statistics object of a feature from its dimensions' ``dimension_stats``."""
    columns = list(zip(*per_dimension, strict=True))
    names = [name for name in STAT_NAMES if name != "count"]
    stats: dict[str, list[Any]] = {name: list(column) for name, column in zip(names, columns, strict=True)}
    stats["count"] = [count]
    return {name: stats[name] for name in STAT_NAMES}


def feature_stats(values: np.ndarray) -> dict[str, list[Any]]:
    """Statistics of one feature held in memory: ``values`` is (n,) for shape-[1] features or (n, d)."""
    columns = np.asarray(values).reshape(len(values), -1)
    vector = np.ndim(values) > 1 and columns.shape[1] > 1
    return collect((dimension_stats(columns[:, d], vector=vector) for d in range(columns.shape[1])), len(values))


def scratch_stats(
    read_block: Callable[[int, int], np.ndarray], dimensions: int, count: int, block: int
) -> dict[str, list[Any]]:
    """Statistics of a vector feature whose dimensions are read ``block`` at a time (``read_block(start,
    stop)`` gives a fresh (stop - start, count) array), on two threads (numpy releases the GIL while it
    partitions and sums)."""
    starts = list(range(0, dimensions, block))
    if len(starts) > 1 and dimensions - starts[-1] < 2:
        starts.pop()  # no block of one dimension (block_stats would take it alone): the last one grows

    def one(index: int) -> list[list[float]]:
        stop = starts[index + 1] if index + 1 < len(starts) else dimensions
        return block_stats(read_block(starts[index], stop))

    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        return collect([d for part in pool.map(one, range(len(starts))) for d in part], count)


class ColumnScratch:
    """A (rows, dimensions) float array stored column-major in an anonymous temporary file: written a block
    of rows at a time, read back a dimension or a block of dimensions at a time. Memory stays one block or
    one column. ``in_memory`` (for arrays that fit a caller's budget): the blocks written are kept as they
    are (the caller no longer changes them), and a block of dimensions is gathered from them when read."""

    def __init__(self, rows: int, dimensions: int, dtype: np.dtype | type = np.float32, folder: Path | None = None,
                 *, in_memory: bool = False):
        self.rows = rows
        self.dimensions = dimensions
        self.dtype = np.dtype(dtype)
        self._parts: list[tuple[int, np.ndarray]] | None = None
        self._file: IO[bytes] | None = None
        if in_memory:
            self._parts = []
            return
        # unlinked at once: it never shows in ``folder`` and vanishes with the process
        self._file = tempfile.TemporaryFile(prefix="ceres-columns-", dir=folder)  # noqa: SIM115
        self._transposed = np.empty((dimensions, _TRANSPOSE_ROWS), dtype=self.dtype)
        self._lock = threading.Lock()
        os.ftruncate(self._file.fileno(), rows * dimensions * self.dtype.itemsize)

    def write(self, first_row: int, block: np.ndarray) -> None:
        """Store rows ``first_row`` .. ``first_row + len(block)`` of every dimension."""
        block = np.asarray(block).reshape(len(block), self.dimensions)
        if self._parts is not None:
            self._parts.append((first_row, block))  # list.append is atomic: writers need no lock
            return
        size = self.dtype.itemsize
        with self._lock:  # one transpose buffer for every writer
            self._write(first_row, block, size)

    def _write(self, first_row: int, block: np.ndarray, size: int) -> None:
        assert self._file is not None
        for start in range(0, len(block), _TRANSPOSE_ROWS):  # transposed a slice at a time, in one buffer
            rows = min(_TRANSPOSE_ROWS, len(block) - start)
            columns = self._transposed[:, :rows]
            np.copyto(columns, block[start : start + rows].T, casting="same_kind")
            for dimension in range(self.dimensions):
                data = memoryview(np.ascontiguousarray(columns[dimension])).cast("B")
                offset = (dimension * self.rows + first_row + start) * size
                while data:
                    written = os.pwrite(self._file.fileno(), data, offset)
                    data, offset = data[written:], offset + written

    def dimension(self, index: int) -> np.ndarray:
        """All rows of one dimension (a fresh array)."""
        return self.block(index, index + 1)[0]

    def block(self, start: int, stop: int) -> np.ndarray:
        """All rows of dimensions ``start`` .. ``stop``, shaped (stop - start, rows): a fresh array."""
        if self._parts is not None:
            out = np.empty((stop - start, self.rows), dtype=self.dtype)
            for first_row, part in self._parts:
                for first in range(0, len(part), _MEMORY_TRANSPOSE_ROWS):  # a slice that stays in the cache
                    rows = part[first : first + _MEMORY_TRANSPOSE_ROWS, start:stop]
                    out[:, first_row + first : first_row + first + len(rows)] = rows.T
            return out
        assert self._file is not None
        out = np.empty((stop - start, self.rows), dtype=self.dtype)
        view = memoryview(out).cast("B")
        offset = start * self.rows * self.dtype.itemsize
        while view:
            done = os.preadv(self._file.fileno(), [view], offset)
            if done == 0:
                raise OSError("column scratch file ended early")
            view, offset = view[done:], offset + done
        return out

    def stats(self) -> dict[str, list[Any]]:
        # blocks of dimensions of about 32 MiB as float64 rows (and their copy in the stored dtype) per thread
        block = max(2, (32 << 20) // (max(1, self.rows) * (8 + self.dtype.itemsize)))
        return scratch_stats(self.block, self.dimensions, self.rows, block)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._parts = None

    def __enter__(self) -> "ColumnScratch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def image_stats(frames: list[np.ndarray]) -> dict[str, list]:
    """Per-channel statistics in [0, 1] of RGB frames (uint8, height x width x 3), each value shaped
    (3, 1, 1) as LeRobot's image statistics are; ``count`` is the number of frames."""
    names = [name for name in STAT_NAMES if name != "count"]
    per_channel = []
    for channel in range(3):
        values = np.concatenate([f[..., channel].ravel() for f in frames]).astype(np.float64) / 255.0
        per_channel.append(
            [values.min(), values.max(), values.mean(), values.std(), *np.quantile(values, _QUANTILE_LEVELS)]
        )
    stats: dict[str, list] = {
        name: [[[float(per_channel[channel][i])]] for channel in range(3)] for i, name in enumerate(names)
    }
    stats["count"] = [len(frames)]  # last, as shards have always written it
    return stats


def pooled_image_stats(per_episode: list[dict[str, list]]) -> dict[str, list]:
    """Combine per-episode sampled-frame statistics (``image_stats``), each frame weighted equally.

    min/max/mean/std are exact over the union of the sampled frames (the shards agree on the
    resolution, so every frame has the same number of pixels). Quantiles cannot be recovered from
    summaries: they are the count-weighted mean of the per-episode quantiles, as LeRobot's own
    ``aggregate_stats`` does.
    """
    counts = np.array([s["count"][0] for s in per_episode], dtype=np.float64)
    weights = (counts / counts.sum()).reshape(-1, 1, 1, 1)

    def stacked(stat: str) -> np.ndarray:
        return np.array([s[stat] for s in per_episode], dtype=np.float64)

    means = stacked("mean")
    mean = (weights * means).sum(axis=0)
    variance = (weights * (stacked("std") ** 2 + (means - mean) ** 2)).sum(axis=0)
    pooled = {
        "min": stacked("min").min(axis=0).tolist(),
        "max": stacked("max").max(axis=0).tolist(),
        "mean": mean.tolist(),
        "std": np.sqrt(variance).tolist(),
        "count": [int(counts.sum())],
    }
    pooled.update({key: (weights * stacked(key)).sum(axis=0).tolist() for key in QUANTILES})
    return pooled
