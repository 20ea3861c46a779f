"""Every file of a shard and of an assembled dataset has one mode (0644, folders 0755), whatever the umask.

The video used to be staged with ``tempfile.mkstemp`` and kept its private 0600, and the assembled dataset
folder kept ``mkdtemp``'s 0700: a copy in a shared folder was unreadable to its group.
"""

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from exporter.assemble import assemble_dataset
from exporter.generate import generate_capture
from exporter.shard import export_shard
from exporter.video import strip_audio

FILE_MODE, FOLDER_MODE = 0o644, 0o755


@contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def modes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]}


def assert_published(root: Path) -> None:
    found = modes(root)
    assert any(name.endswith(".mp4") for name in found), "the tree holds a video"
    wrong = {name: oct(mode) for name, mode in found.items()
             if mode != (FOLDER_MODE if (root / name).is_dir() else FILE_MODE)}
    assert not wrong, f"files or folders with another mode under {root.name}: {wrong}"


# The usual umask and a private one: the published modes are the same under both.
@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_every_file_of_shards_and_their_dataset_has_the_published_mode(tmp_path, mask):
    shards, tasks, from_index = [], None, 0
    with umask(mask):
        # aligned (the video is remuxed) and with a retry (the video is cut)
        for index, retries in enumerate((0, 1)):
            capture = generate_capture(tmp_path / "captures" / f"c{index}", seconds=2, seed=40 + index,
                                       width=64, height=48, retries=retries)
            result = export_shard(capture, tmp_path / "shards", episode_index=index, from_index=from_index,
                                  tasks=tasks)
            shards.append(result.shard_dir)
            tasks, from_index = result.tasks, from_index + result.rows
        dataset = assemble_dataset(tmp_path / "dataset", shards).dataset_dir
    for shard in shards:
        assert_published(shard)
    assert_published(dataset)


def test_a_stripped_media_file_has_the_published_mode(tmp_path):
    capture = generate_capture(tmp_path / "capture", seconds=2, width=64, height=48, microphone="track")
    with umask(0o022):
        strip_audio(capture / "media/camera.mp4", tmp_path / "silent.mp4")
    assert stat.S_IMODE((tmp_path / "silent.mp4").stat().st_mode) == FILE_MODE
