"""Bystander faces: the face detector and the detections file kept beside a shard (docs/privacy.md)."""
