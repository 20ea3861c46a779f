"""The review data of an episode (services/review.py, exporter/review.py): downsampled, but exact segments,
gaps and removed retries; the viewer page."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages
from django.urls import reverse

from exporter.review import episode_review
from portal.core import storage

pytestmark = pytest.mark.django_db


def test_review_data_is_downsampled_but_segments_gaps_and_retries_are_exact(team, verified, make_request, tmp_path,
                                                                          client):
    episode = verified(1, seconds=3.0, retries=2)[0]
    data = next(f["path"] for f in episode.shard_files if f["path"].startswith("data/"))
    local = tmp_path / "data.parquet"
    storage.fetch(storages["shards"], episode.prefix + data, local)
    full = episode_review(local, fps=15, segments=[])
    small = episode_review(local, fps=15, segments=[], max_samples=10)
    assert full["step"] == 1 and len(full["frames"]) == full["length"] == episode.length
    assert len(small["frames"]) <= 10 and small["step"] > 1
    assert len(small["hands"]["left_hand"][0]) == 50  # 25 joints, x and y
    assert small["gaps"] == full["gaps"] and small["removed"] == full["removed"] and full["removed"]

    request = make_request([episode])
    client.force_login(team.reg.ethics)
    answer = client.get(reverse("release-episode-data", args=[team.study.code, request.number, 0])).json()
    assert answer["episode"] == "episode-000000" and answer["fps"] == 15
    assert answer["segments"][0]["frame_index_from"] == 0
    assert answer["segments"][-1]["frame_index_to"] == episode.length
    page = client.get(reverse("release-episode", args=[team.study.code, request.number, 0])).content.decode()
    assert 'id="viewer"' in page and "{#" not in page and "{%" not in page  # no template text shown
    assert str(episode.recording.headset) in page  # the study's own staff see the headset under the video
