"""Signals of the recording pipeline that later work hooks into."""

from django.dispatch import Signal

# Sent by ``services.verification.verify_episode`` inside its transaction when a recording first becomes
# verified, with ``episode``: its shard matched its receipt and it may now be released.
episode_verified = Signal()
