"""The review data of a shard: read from the shard's own files (data parquet, info, episode metadata)."""

import json
import shutil
from pathlib import Path

from exporter.generate import generate_capture
from exporter.receipt import folder_files
from exporter.review import episode_review, review_files, shard_review
from exporter.shard import export_shard


def test_a_shard_folder_holding_only_its_review_files_gives_the_episode_review(tmp_path: Path):
    source = generate_capture(tmp_path / "capture", seconds=2.0, rate_hz=15, seed=5, camera="none", retries=1)
    shard = export_shard(source, tmp_path / "out").shard_dir
    needed = review_files(folder_files(shard))
    assert needed[0].startswith("data/") and needed[1:] == ["meta/info.json", "ceres/episode-metadata.json"]
    partial = tmp_path / "partial"
    for name in needed:
        (partial / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shard / name, partial / name)
    segments = json.loads((shard / "ceres/episode-metadata.json").read_text())["segments"]
    review = shard_review(partial, max_samples=7)
    assert review == episode_review(shard / needed[0], fps=15, segments=segments, max_samples=7)
    assert review["fps"] == 15 and len(review["segments"]) == len(segments) > 0 and len(review["frames"]) <= 7
