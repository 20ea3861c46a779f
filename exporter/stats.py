"""Feature statistics (shard.md section 6): population std, numpy's default (linear) quantiles."""

from typing import Any

import numpy as np

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
STAT_NAMES = ("min", "max", "mean", "std", "count", *QUANTILES)
_BLOCK = 16  # columns converted to float64 at a time, to bound memory on long episodes


def feature_stats(values: np.ndarray) -> dict[str, list[Any]]:
    """Statistics of one feature over all rows; ``values`` is (n,) for shape-[1] features or (n, d)."""
    columns = values.reshape(len(values), -1)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in STAT_NAMES if name != "count"}
    for start in range(0, columns.shape[1], _BLOCK):
        block = columns[:, start : start + _BLOCK].astype(np.float64)
        parts["min"].append(block.min(axis=0))
        parts["max"].append(block.max(axis=0))
        parts["mean"].append(block.mean(axis=0))
        parts["std"].append(block.std(axis=0))
        quantiles = np.quantile(block, list(QUANTILES.values()), axis=0)
        for name, row in zip(QUANTILES, quantiles, strict=True):
            parts[name].append(row)
    stats: dict[str, list[Any]] = {name: np.concatenate(parts[name]).tolist() for name in parts}
    stats["count"] = [len(values)]
    return {name: stats[name] for name in STAT_NAMES}
