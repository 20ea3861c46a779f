"""Video statistics read their keyframes through the container's index, by seeks: the same frames, in
the same order, as a pass over every packet."""

from pathlib import Path

import av
import numpy as np
import pytest

import exporter.video
from exporter.video import video_stats


def encoded(path: Path, frames: int, keyint: int, bframes: int) -> Path:
    with av.open(str(path), "w") as output:
        params = f"keyint={keyint}:min-keyint={keyint}:scenecut=0:bframes={bframes}"
        stream = output.add_stream("libx264", rate=30, options={"preset": "medium", "x264-params": params})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        rng = np.random.default_rng(frames)
        for index in range(frames):
            picture = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = index
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    return path


@pytest.mark.parametrize(("frames", "keyint", "bframes"), [(120, 4, 0), (230, 7, 2), (1200, 11, 3)])
def test_keyframes_through_the_index_give_a_full_pass_statistics(tmp_path: Path, monkeypatch, frames, keyint, bframes):
    path = encoded(tmp_path / "video.mp4", frames, keyint, bframes)
    assert exporter.video._indexed_keyframes(path) is not None  # the index path is the one taken
    through_index = video_stats(path)
    monkeypatch.setattr(exporter.video, "_indexed_keyframes", lambda mp4: None)
    assert video_stats(path) == through_index


def test_few_keyframes_are_not_read_through_the_index(tmp_path: Path):
    path = encoded(tmp_path / "video.mp4", 60, 10, 0)  # 6 keyframes: every frame is sampled instead
    assert exporter.video._indexed_keyframes(path) is None
    assert video_stats(path)["count"] == [60]
