"""Wording that misled: an episode index shown as a count, the file counts of the release page and ceres-pull."""

from __future__ import annotations

import pytest

from portal.core.templatetags.ceres import episodes_counted, release_reason


@pytest.mark.parametrize(("indexes", "expected"), [
    ([4], "1 episode (episode-000004)"),  # index 4 of a release of two episodes: one episode, not four
    ([7, 2], "2 episodes (episode-000002, episode-000007)"),
    ([], "no episode"),
])
def test_episode_indexes_are_counted_and_named(indexes, expected):
    assert episodes_counted(indexes) == expected


@pytest.mark.parametrize(("reason", "expected"), [
    ("consent withdrawn: 4 removed", "consent withdrawn: 1 episode (episode-000004) removed"),
    ("consent withdrawn: 0, 12 removed", "consent withdrawn: 2 episodes (episode-000000, episode-000012) removed"),
    ("the purpose changed", "the purpose changed"),
    ("", ""),
])
def test_a_release_reason_names_the_removed_episodes(reason, expected):
    assert release_reason(reason) == expected
