"""Pooling the shards' camera statistics: exact min, max, mean and std over the union of the sampled frames;
vector features reduced a block of dimensions at a time, bit for bit numpy's reductions of the whole array."""

import numpy as np
import pytest

from exporter.stats import (
    QUANTILES,
    ColumnScratch,
    block_stats,
    dimension_stats,
    feature_stats,
    image_stats,
    pooled_image_stats,
    scratch_stats,
)


def test_pooled_image_stats_are_those_of_all_the_frames_at_once():
    rng = np.random.default_rng(7)
    frames = [rng.integers(0, 256, size=(4, 6, 3), dtype=np.uint8) for _ in range(7)]
    groups = [frames[:2], frames[2:3], frames[3:]]  # episodes with different numbers of sampled frames
    pooled = pooled_image_stats([image_stats(group) for group in groups])
    whole = image_stats(frames)
    assert pooled["count"] == whole["count"] == [7]
    for name in ("min", "max", "mean", "std"):
        np.testing.assert_allclose(pooled[name], whole[name], rtol=1e-12, atol=1e-12)
    # Quantiles cannot be pooled exactly: the count-weighted mean of the episodes' quantiles.
    weights = np.array([2, 1, 4]) / 7
    for key in QUANTILES:
        expected = sum(w * np.array(image_stats(g)[key]) for w, g in zip(weights, groups, strict=True))
        np.testing.assert_allclose(pooled[key], expected, rtol=1e-12)
    assert np.array(pooled["mean"]).shape == (3, 1, 1)


def _whole_array_stats(values: np.ndarray) -> np.ndarray:
    """numpy's own reductions over a (rows, dimensions) array, one row of figures per dimension."""
    whole = values.astype(np.float64)
    levels = list(QUANTILES.values())
    return np.array(list(zip(whole.min(0), whole.max(0), whole.mean(0), whole.std(0),
                             *np.quantile(whole, levels, axis=0), strict=True)))


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # the infinities, as numpy itself warns
@pytest.mark.parametrize("case", ["normal", "wide", "ties", "one row", "two rows", "constant", "infinite", "float64",
                                  "nan", "two dimensions", "odd width"])
def test_block_stats_are_bit_for_bit_those_of_the_whole_array(case: str):
    rng = np.random.default_rng(3)
    values = {
        "normal": rng.normal(size=(7001, 37)).astype(np.float32),
        "wide": (rng.normal(size=(5000, 9)) * 10.0 ** rng.integers(-8, 8, size=9)).astype(np.float32),
        "ties": rng.integers(0, 3, size=(999, 5)).astype(np.float32),
        "one row": rng.normal(size=(1, 4)).astype(np.float32),
        "two rows": rng.normal(size=(2, 4)).astype(np.float32),
        "constant": np.ones((100, 3), np.float32),
        "infinite": np.array([[np.inf, 1], [1, -np.inf], [2, 3]] * 50, np.float32),
        "float64": rng.normal(size=(3333, 6)),
        "nan": np.array([[np.nan, 1], [1, 2], [2, 3]] * 5, np.float32),
        "two dimensions": rng.normal(size=(1237, 2)).astype(np.float32) * 1e3,
        "odd width": rng.normal(size=(1237, 65)).astype(np.float32) * 1e3,
    }[case]
    expected = _whole_array_stats(values)
    levels = list(QUANTILES.values())
    per_dimension = np.array([dimension_stats(values[:, d], vector=True) for d in range(values.shape[1])])
    got = np.array(block_stats(np.ascontiguousarray(values.T)))
    assert np.array_equal(got.view(np.int64), expected.view(np.int64))  # the same bits, NaN and -0.0 alike
    assert np.array_equal(per_dimension.view(np.int64), expected.view(np.int64))
    for d in range(values.shape[1]):  # a scalar feature's dimension: numpy's 1-D (pairwise) reductions
        column = values[:, d].astype(np.float64)
        scalar = [column.min(), column.max(), column.mean(), column.std(), *np.quantile(column, levels)]
        assert np.array_equal(np.array(dimension_stats(values[:, d], vector=False)).view(np.int64),
                              np.array(scalar).view(np.int64))


@pytest.mark.parametrize("in_memory", [False, True])
def test_column_scratch_gives_the_same_statistics_in_any_block_size(tmp_path, in_memory: bool):
    rng = np.random.default_rng(5)
    values = rng.normal(size=(5000, 410)).astype(np.float32)
    expected = feature_stats(values)
    with ColumnScratch(len(values), 410, np.float32, folder=tmp_path, in_memory=in_memory) as scratch:
        scratch.write(3000, values[3000:])  # rows may come in any order
        scratch.write(0, values[:3000])
        assert np.array_equal(scratch.dimension(7), values[:, 7])
        assert scratch.stats() == expected
        for block in (2, 3, 409, 500):  # a last block of one dimension joins the one before
            assert scratch_stats(scratch.block, 410, len(values), block) == expected
    assert list(tmp_path.iterdir()) == []


def test_the_compiled_selection_is_built():
    """Where the tests run, the install compiled it (python3-dev and gcc): the paths below compare it with numpy."""
    import exporter.stats

    assert exporter.stats._COMPILED is not None


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 1.2e-38, -3.4e38, 3.4e38, 1.0, -1.0, 0.5],
                   dtype=np.float32)


def _rows(rng: np.random.Generator, kind: str, rows: int, count: int) -> np.ndarray:
    if kind == "normal":
        return rng.normal(size=(rows, count)).astype(np.float32)
    if kind == "ties":
        return rng.integers(-3, 4, size=(rows, count)).astype(np.float32)
    if kind == "untracked":  # a tenth of zeros, as the states of frames where a hand is not tracked
        return (rng.normal(size=(rows, count)) * (rng.random((rows, count)) < 0.9)).astype(np.float32)
    if kind == "special":
        return rng.choice(SPECIAL, size=(rows, count))
    if kind == "bits":  # any float32 but NaN: every bucket and every low half may be hit
        values = rng.integers(0, 2**32, size=(rows, count), dtype=np.uint32).view(np.float32)
        return np.where(np.isnan(values), np.float32(7.0), values)
    if kind == "one bucket":  # every value shares its top 16 bits: one bucket holds every position
        return (np.float32(1.0) + rng.integers(0, 2**16, size=(rows, count)).astype(np.float32) * 2**-23).astype(
            np.float32)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["normal", "ties", "untracked", "special", "bits", "one bucket"])
@pytest.mark.parametrize("count", [1, 2, 3, 17, 1000, 70001])
def test_the_compiled_selection_takes_numpys_values_or_leaves_the_row(kind: str, count: int):
    """Bit for bit what numpy's partition leaves at every wanted position; a row is left to numpy only when it
    holds a NaN, or -0.0 and +0.0 where a zero is taken (which of the two numpy leaves depends on its algorithm)."""
    import exporter.stats

    rng = np.random.default_rng(count * 31 + len(kind))
    for _ in range(4):
        block = _rows(rng, kind, 6, count)
        if kind == "special" and count > 3:
            block[0, : count // 2] = np.nan
        kth = sorted(set(rng.integers(0, count, size=int(rng.integers(1, 13))).tolist()) | {0, count - 1})
        before = block.copy()
        selected = np.empty((6, len(kth)), dtype=np.float32)
        left = exporter.stats._COMPILED.select(block, tuple(kth), selected)
        assert np.array_equal(block.view(np.uint32), before.view(np.uint32))  # not reordered
        expected = block.copy()
        expected.partition(kth, axis=1)
        expected = expected[:, kth]
        for row in range(6):
            has_nan = bool(np.isnan(block[row]).any())
            zeros = block[row][block[row] == 0]
            mixed = bool(np.signbit(zeros).any() and (~np.signbit(zeros)).any())
            zero_taken = not has_nan and bool((expected[row] == 0).any())
            assert (row in left) == (has_nan or (mixed and zero_taken)), (row, left)
            if row not in left:
                assert np.array_equal(selected[row].view(np.uint32), expected[row].view(np.uint32)), row


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # the infinities, as numpy itself warns
def test_statistics_are_the_same_with_the_compiled_selection_and_without(monkeypatch):
    """Rows the selection takes and rows it leaves (a NaN is not here: block_stats leaves those rows to
    dimension_stats; mixed zeros are), the quantiles the same bits either way."""
    import exporter.stats

    rng = np.random.default_rng(11)
    values = np.concatenate([_rows(rng, kind, 5, 4001) for kind in ("normal", "ties", "untracked", "special",
                                                                     "bits", "one bucket")])
    values[3, :2000] = -0.0  # mixed zeros where the median is taken
    values[3, 2000:] = 0.0
    values[4, :] = -0.0  # only -0.0: the selection takes it
    kth = [0, 2000, 4000]
    assert exporter.stats._COMPILED.select(values[:6].copy(), tuple(kth), np.empty((6, 3), np.float32)) == [3]
    with_selection = block_stats(values.copy())
    monkeypatch.setattr(exporter.stats, "_COMPILED", None)
    assert np.array_equal(np.array(block_stats(values.copy())).view(np.int64),
                          np.array(with_selection).view(np.int64))


@pytest.mark.parametrize(("block", "kth", "out", "message"), [
    (np.zeros((2, 5), np.float64), (0, 4), np.zeros((2, 2), np.float32), "float32"),
    (np.zeros((2, 5), np.float32), (0, 4), np.zeros((2, 3), np.float32), "shaped"),
    (np.zeros((2, 5), np.float32), (4, 0), np.zeros((2, 2), np.float32), "sorted"),
    (np.zeros((2, 5), np.float32), (0, 5), np.zeros((2, 2), np.float32), "within"),
    (np.zeros((2, 5), np.float32)[:, ::2], (0, 1), np.zeros((2, 2), np.float32), "contiguous"),
])
def test_the_compiled_selection_refuses_what_it_cannot_take(block, kth, out, message: str):
    import exporter.stats

    with pytest.raises((TypeError, ValueError), match=message):
        exporter.stats._COMPILED.select(block, kth, out)


@pytest.mark.parametrize(("block", "mean", "std", "message"), [
    (np.zeros((2, 5), np.float64), np.zeros(2), np.zeros(2), "float32"),
    (np.zeros((2, 5), np.float32), np.zeros(2, np.float32), np.zeros(2), "float64"),
    (np.zeros((2, 5), np.float32), np.zeros(3), np.zeros(2), "shaped"),
    (np.zeros((2, 0), np.float32), np.zeros(2), np.zeros(2), "not empty"),
])
def test_the_compiled_moments_refuse_what_they_cannot_take(block, mean, std, message: str):
    import exporter.stats

    with pytest.raises((TypeError, ValueError), match=message):
        exporter.stats._COMPILED.moments(block, mean, std)


def test_float32_blocks_take_the_compiled_path_and_its_moments_are_numpys(monkeypatch):
    """The states' blocks go through the module (the tests above would pass if block_stats never called it), and its
    mean and std alone are numpy's over the C-ordered (rows, dimensions) array, bit for bit."""
    import exporter.stats

    module = exporter.stats._COMPILED
    called = []

    class Spy:
        def select(self, *args):
            called.append("select")
            return module.select(*args)

        def moments(self, *args):
            called.append("moments")
            return module.moments(*args)

    values = _rows(np.random.default_rng(13), "untracked", 9, 20001)
    monkeypatch.setattr(exporter.stats, "_COMPILED", Spy())
    block_stats(values.copy())
    assert called == ["moments", "select"]
    whole = np.ascontiguousarray(values.T, dtype=np.float64)  # C-ordered: numpy sums its columns row after row
    mean, std = np.empty(9), np.empty(9)
    module.moments(values, mean, std)
    assert np.array_equal(mean.view(np.int64), whole.mean(axis=0).view(np.int64))
    assert np.array_equal(std.view(np.int64), whole.std(axis=0).view(np.int64))
