"""Hooks into the pipeline: a verified episode gets its tags (tasks, outcomes) for the release filters."""

from django.dispatch import receiver

from portal.recordings.signals import episode_verified
from portal.releases.services.release_requests import tag_episode


@receiver(episode_verified, dispatch_uid="releases.tag_verified_episode")
def tag_verified_episode(sender, episode, **kwargs) -> None:
    tag_episode(episode)
