"""Bystanders' faces in an episode's video: the detection job and its stored detections, and the ethics officers'
review (boxes added over missed faces, detections removed, the review itself).

The detections file lives in the ``shards`` storage beside the shard, never inside it (``FaceDetection.key``); the
shard stays immutable. Every model carries a ``study`` foreign key and a ``ScopedManager``. Changes happen only in
``portal.faces.services``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django_scopes import ScopedManager

from portal.core.leases import LeasedJob
from portal.recordings.models import Episode
from portal.studies.models import Study


class FaceDetection(LeasedJob):
    """One detector's run over one episode's video: a job on the heavy queue, then the record of its stored file."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Detecting"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    LEASE_SETTING, LEASE_JOB = "CERES_FACES_LEASE_SECONDS", "face detection"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="face_detections")
    detector_id = models.CharField(max_length=100, help_text="Detector name, version, weights digest and settings tag.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    reason = models.TextField(blank=True, help_text="Why the detection failed.")
    progress = models.PositiveSmallIntegerField(default=0)
    progress_note = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    threshold = models.FloatField(null=True, blank=True)
    key = models.CharField(max_length=300, blank=True, help_text="The detections file in the shards storage.")
    sha256 = models.CharField(max_length=64, blank=True)
    bytes = models.PositiveBigIntegerField(null=True, blank=True)
    frame_count = models.PositiveIntegerField(null=True, blank=True, help_text="Frames of the video read.")
    frames_with_faces = models.PositiveIntegerField(null=True, blank=True)
    box_count = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["episode", "detector_id"], name="face_detection_unique")]

    def __str__(self) -> str:
        return f"{self.episode_id}: faces by {self.detector_id} ({self.state})"


class FaceSpan(models.Model):
    """A box an ethics officer added over a face the detector missed, for a span of frames: keyframes
    ``[[frame, x0, y0, x1, y1], ...]`` (pixels of the video frame, frames ascending), interpolated linearly between
    them. Independent of the detector: it still stands after a detector upgrade. Removed spans keep their row."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="face_spans")
    keyframes = models.JSONField()
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    added_at = models.DateTimeField(auto_now_add=True)
    removed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    removed_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.episode_id}: added box, frames {self.first_frame}-{self.last_frame}"

    @property
    def first_frame(self) -> int:
        return self.keyframes[0][0]

    @property
    def last_frame(self) -> int:
        return self.keyframes[-1][0]


class FaceRemoval(models.Model):
    """A detection an ethics officer removed as false: the ``index``-th box (in the file's order) of ``frame`` in
    the detections of ``detector_id``; ``box`` is what it was, for the record."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="face_removals")
    detector_id = models.CharField(max_length=100)
    frame = models.PositiveIntegerField()
    index = models.PositiveSmallIntegerField()
    box = models.JSONField()
    removed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    removed_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["frame", "index"]
        constraints = [models.UniqueConstraint(fields=["episode", "detector_id", "frame", "index"],
                                               name="face_removal_unique")]

    def __str__(self) -> str:
        return f"{self.episode_id}: detection {self.frame}/{self.index} removed"


class FaceReview(models.Model):
    """An ethics officer marked the episode's faces reviewed, for the detections of ``detector_id``. A later change
    to the episode's boxes asks for a new review (``services.review.reviewed``)."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="face_reviews")
    detector_id = models.CharField(max_length=100)
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reviewed_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-reviewed_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.episode_id}: faces reviewed for {self.detector_id}"
