"""Pooling the shards' camera statistics: exact min, max, mean and std over the union of the sampled frames."""

import numpy as np

from exporter.stats import QUANTILES, image_stats, pooled_image_stats


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
