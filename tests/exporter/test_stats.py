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
