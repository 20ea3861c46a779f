"""The generated face test set's long face-free video (exporter/faces/testset.py, used by bench/faces.py)."""

from __future__ import annotations

import numpy as np
import pytest

from exporter.faces import testset

pytest.importorskip("skimage.data")


def test_free_video_is_cut_into_scenes_and_made_frame_by_frame():
    video = testset.free_video(7, 0.1, width=320, height=180, fps=10, scene_seconds=(1.0, 2.5))
    # 0.1 minute at 10 fps: 60 frames, in scenes of 10-25 frames (the last one cut to what is left)
    assert video.length == 60 and video.minutes == pytest.approx(0.1)
    assert len(video.scenes) >= 3
    assert all(10 <= n <= 25 for n in video.scenes[:-1]) and 1 <= video.scenes[-1] <= 25
    frames = video.frames()
    assert iter(frames) is frames  # a generator: nothing is made before it is asked for
    count = 0
    for frame in frames:
        assert frame.shape == (180, 320, 3) and frame.dtype == np.uint8
        count += 1
    assert count == 60
    first = next(testset.free_video(7, 0.1, width=320, height=180, fps=10, scene_seconds=(1.0, 2.5)).frames())
    assert np.array_equal(first, next(video.frames()))
    starts = np.cumsum((0, *video.scenes[:-1]))
    pictures = [frame for i, frame in enumerate(video.frames()) if i in set(starts.tolist())]
    assert not np.array_equal(pictures[0], pictures[1])  # each scene has its own wall


def test_a_long_scene_keeps_its_frames_whole():
    # 40 s in one scene: the camera pans up to 6 px a frame, far more than the wall's margin, and turns back
    video = testset.free_video(11, 40 / 60, width=160, height=96, fps=10, scene_seconds=(40.0, 40.0))
    assert video.scenes == (400,)
    shapes = {frame.shape for frame in video.frames()}
    assert shapes == {(96, 160, 3)}


def test_free_video_refuses_a_length_or_scene_that_cannot_be():
    with pytest.raises(ValueError, match="free video"):
        testset.free_video(1, 0)
    with pytest.raises(ValueError, match="free video"):
        testset.free_video(1, 1, scene_seconds=(5.0, 2.0))


def test_a_long_clip_with_a_face_keeps_its_frames_whole():
    # bench/faces.py times detect_video on a 90-frame clip: its view pans past the wall's margin and turns back
    clip = testset.make_clip(3, width=160, height=96, length=90, band=(24, 40), source=testset.CAMERAMAN)
    assert {frame.shape for frame in clip.frames()} == {(96, 160, 3)}
    assert len(clip.truth) == len(clip.covered) == 90


def test_visible_is_the_share_of_the_face_the_hand_leaves_in_view():
    # Seed 9022: the hand's square covers the whole face box on every frame, but the face shows between the
    # fingers (12-24 % of its pixels); seed 9021: the square covers it on the first frames while most of the face
    # is beside the palm; seed 5022: the hand never comes near the face.
    hidden = testset.make_clip(9022, length=16, band=testset.SIZE_BANDS[2])
    assert all(c == 1.0 for c in hidden.covered)
    assert all(0.1 < v < 0.25 for v in hidden.visible)
    beside = testset.make_clip(9021, length=16, band=testset.SIZE_BANDS[1])
    assert beside.covered[0] == 1.0 and 0.6 < beside.visible[0] < 0.8
    assert beside.visible[-1] == 1.0
    clear = testset.make_clip(5022, length=16, band=testset.SIZE_BANDS[2])
    assert clear.visible == (1.0,) * 16 and max(clear.covered) == 0.0
    free = testset.make_clip(5023, length=4)
    assert free.visible == (1.0,) * 4 and free.truth == (None,) * 4
    # the pixels agree: where the face is hidden, its box in the rendered frame is mostly the hand's skin colour
    frame = next(iter(hidden.frames()))
    x0, y0, x1, y1 = (round(v) for v in hidden.truth[0])
    box = frame[y0:y1, x0:x1].reshape(-1, 3).astype(int)
    skin = (box[:, 0] > box[:, 2] + 30) & (box[:, 0] > box[:, 1] + 15)
    assert skin.mean() > 0.6
