"""Hooks into the pipeline: a verified episode gets its faces detected (the study's face policy permitting)."""

from django.dispatch import receiver

from portal.faces.services.detection import queue_detection
from portal.recordings.signals import episode_verified


@receiver(episode_verified, dispatch_uid="faces.detect_verified_episode")
def detect_verified_episode(sender, episode, **kwargs) -> None:
    queue_detection(None, episode)
