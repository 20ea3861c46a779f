"""Recordings, their episodes and shards, the study dataset's allocation counters, audio keys and receipts.

Every model carries a ``study`` foreign key and a ``ScopedManager``: reading outside
``django_scopes.scope(study=...)`` fails instead of leaking another study's rows. State changes
happen only in ``portal.recordings.services``.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models.fields.json import KT
from django_scopes import ScopedManager

from portal.core.leases import LeasedJob
from portal.core.states import StateMachineModel
from portal.recordings.exceptions import IllegalTransition
from portal.studies.models import Study


class StudyDataset(models.Model):
    """The study's one dataset: the next episode index, the next global frame index and the task table.

    Export allocates from this row under ``select_for_update``, so allocations are serialised per study.
    """

    study = models.OneToOneField(Study, on_delete=models.PROTECT, related_name="dataset")
    next_episode_index = models.PositiveIntegerField(default=0)
    next_frame_index = models.PositiveBigIntegerField(default=0)
    tasks = models.JSONField(default=list, help_text="Task texts by task_index; only ever appended to.")

    objects = ScopedManager(study="study")

    def __str__(self) -> str:
        return f"dataset of {self.study}"


class RecordingQuerySet(models.QuerySet):
    def listed(self) -> RecordingQuerySet:
        """What a list of recordings shows, and nothing else (no JSON blobs, only the claims the labels need):
        read as named rows of ``LIST_COLUMNS`` (``core.pagination.list_page``'s ``columns``). The recordings page's
        50 rows are no model instances, nor their headsets', demonstrators' and episodes' (a third of its CPU)."""
        return self.annotate(
            claimed_headset_id=KT("claims__headset_id"), claimed_demonstrator_id=KT("claims__demonstrator_id"))


LIST_COLUMNS = ("pk", "uid", "state", "reason", "progress", "capture_id", "original_name", "recorded_at", "audio",
                "created_at", "headset__headset_id", "demonstrator__designator", "episode__episode_index",
                "claimed_headset_id", "claimed_demonstrator_id")


class Recording(LeasedJob, StateMachineModel):
    class State(models.TextChoices):
        RECEIVED = "received", "Received"
        REJECTED = "rejected", "Rejected (invalid source)"
        QUARANTINED = "quarantined", "Quarantined"
        DUPLICATE = "duplicate", "Duplicate"
        QUEUED = "queued", "Queued for export"
        RUNNING = "running", "Exporting"
        EXPORTED = "exported", "Exported"
        VERIFIED = "verified", "Verified"
        FAILED = "failed", "Export failed"

    class Via(models.TextChoices):
        UPLOAD = "upload", "Upload page"
        API = "api", "API"
        COMMAND = "command", "Ingest command"
        INBOX = "inbox", "Inbox folder"

    class Audio(models.TextChoices):
        UNKNOWN = "unknown", "Not yet checked"
        NONE = "none", "No audio in source"
        STRIPPED = "stripped", "Stripped"
        ENCRYPTED = "encrypted", "Kept, encrypted"
        PURGED = "purged", "Purged"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # Indexed as the first column of the lists' indexes (Meta.indexes), not alone.
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="recordings", db_index=False)
    state = models.CharField(max_length=12, choices=State.choices, default=State.RECEIVED)
    reason = models.TextField(blank=True, help_text="Why the recording is quarantined, rejected or failed.")
    progress = models.PositiveSmallIntegerField(default=0)
    progress_note = models.CharField(max_length=200, blank=True)

    via = models.CharField(max_length=10, choices=Via.choices)
    original_name = models.CharField(max_length=255)
    incoming_name = models.CharField(max_length=512, blank=True, help_text="The uploaded object awaiting ingest.")
    content_sha256 = models.CharField(max_length=64, blank=True)
    duplicate_of = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    capture_id = models.CharField(max_length=128, blank=True)
    recorded_at = models.DateTimeField(null=True, blank=True)
    claims = models.JSONField(default=dict, blank=True, help_text="The recorder's study block from capture.json.")
    summary = models.JSONField(default=dict, blank=True, help_text="Rate, rows, segments, camera, warnings.")
    source_files = models.JSONField(default=list, blank=True, help_text="Stored silent source: path, bytes, sha256.")
    # Indexed together with the list order (Meta.indexes), not alone.
    headset = models.ForeignKey("studies.Headset", on_delete=models.PROTECT, null=True, blank=True,
                                related_name="recordings", db_index=False)
    demonstrator = models.ForeignKey("studies.Demonstrator", on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="recordings", db_index=False)

    audio = models.CharField(max_length=10, choices=Audio.choices, default=Audio.UNKNOWN)
    audio_objects = models.JSONField(default=list, blank=True,
                                     help_text="Encrypted raw-audio objects: path, source name, sha256, bytes.")

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # The moves a recording may make, and nothing else (a state moving to itself is a re-check, a new
    # registration or an export attempt taking over a dead one's lease).
    TRANSITIONS: dict[str, frozenset[str]] = {
        State.RECEIVED: frozenset({State.REJECTED, State.DUPLICATE, State.QUARANTINED, State.QUEUED}),
        State.QUARANTINED: frozenset({State.QUARANTINED, State.QUEUED}),
        State.QUEUED: frozenset({State.RUNNING, State.FAILED}),
        State.RUNNING: frozenset({State.RUNNING, State.QUEUED, State.EXPORTED, State.FAILED}),
        State.EXPORTED: frozenset({State.VERIFIED}),
        State.FAILED: frozenset({State.QUEUED}),
        State.VERIFIED: frozenset(),
        State.REJECTED: frozenset(),
        State.DUPLICATE: frozenset(),
    }
    # States in which the pipeline still works on the recording without anyone's action.
    IN_FLIGHT = frozenset({State.RECEIVED, State.QUEUED, State.RUNNING, State.EXPORTED})
    illegal_transition = IllegalTransition
    LEASE_SETTING, LEASE_JOB = "CERES_EXPORT_LEASE_SECONDS", "export"

    objects = ScopedManager(study="study", _manager_class=models.Manager.from_queryset(RecordingQuerySet))

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "content_sha256"], name="recording_content_unique_in_study",
                condition=models.Q(duplicate_of__isnull=True) & ~models.Q(content_sha256=""),
            ),
        ]
        # One per filter of the recordings list, each ending in the list's order (newest first), so every
        # page of every filter is a range scan; the dashboard counts states from the second.
        indexes = [
            models.Index(fields=["study", "created_at", "id"], name="recording_list"),
            models.Index(fields=["study", "state", "created_at", "id"], name="recording_list_state"),
            models.Index(fields=["headset", "created_at", "id"], name="recording_list_headset"),
            models.Index(fields=["demonstrator", "created_at", "id"], name="recording_list_demonstrator"),
            models.Index(fields=["study", "recorded_at"], name="recording_recorded_at"),
        ]

    def __str__(self) -> str:
        return self.capture_id or self.original_name

    @property
    def prefix(self) -> str:
        """Every object of this recording in the ``captures`` storage lives under this prefix."""
        return f"{self.study.code}/{self.uid}/"

    def transition_refusal(self, state: str) -> str:
        return f"a recording cannot go from {self.state} to {state}"

    @property
    def in_flight(self) -> bool:
        return self.state in self.IN_FLIGHT

    @property
    def recorded_on(self):
        return self.recorded_at.date() if self.recorded_at else None

    def _claimed(self, claim: str):
        return self.claims.get(claim) if isinstance(self.claims, dict) else None

    def _label(self, registered, claim: str) -> str:
        if registered is not None:
            return str(registered)
        claimed = self._claimed(claim)
        return f"{claimed} (not registered)" if claimed else "—"

    @property
    def headset_label(self) -> str:
        """The registered headset, else the one the source claims, else a dash (a rejected source has no claims)."""
        return self._label(self.headset, "headset_id")

    @property
    def demonstrator_label(self) -> str:
        """The registered demonstrator, else the designator the source claims, else a dash."""
        return self._label(self.demonstrator, "demonstrator_id")


class Episode(models.Model):
    """The episode a recording was allocated in its study dataset, and the shard written for it."""

    class Receipt(models.TextChoices):
        PENDING = "pending", "Not yet verified"
        VERIFIED = "verified", "Verified"
        MISMATCH = "mismatch", "Mismatch"

    # Indexed as the first column of the unique episode index and the receipt index, not alone.
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="episodes", db_index=False)
    recording = models.OneToOneField(Recording, on_delete=models.PROTECT, related_name="episode")
    episode_index = models.PositiveIntegerField()
    from_index = models.PositiveBigIntegerField(help_text="Global index of the episode's first frame.")
    length = models.PositiveIntegerField(help_text="Frames (rows) in the episode.")
    task_count = models.PositiveIntegerField(help_text="Length of the study's task table as of the allocation.")
    allocated_at = models.DateTimeField(auto_now_add=True)
    exported_at = models.DateTimeField(null=True, blank=True)
    shard_files = models.JSONField(default=list, blank=True, help_text="The receipt's artefacts.")
    receipt_sha256 = models.CharField(max_length=64, blank=True)
    video_method = models.CharField(max_length=12, blank=True)
    raw_audio_retained = models.BooleanField(default=False)
    receipt_status = models.CharField(max_length=10, choices=Receipt.choices, default=Receipt.PENDING)
    verified_at = models.DateTimeField(null=True, blank=True)
    # db_default too: a row an older migration's model writes (the migration tests) still gets an empty map.
    stored_checksums = models.JSONField(
        default=dict, db_default={}, blank=True,
        help_text="What the last verification that matched read of each shard object: path -> SHA-256, MD5, "
                  "bytes and the store's ETag (empty before it, or after a mismatch).")

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["episode_index"]
        constraints = [
            models.UniqueConstraint(fields=["study", "episode_index"], name="episode_index_unique_in_study"),
            models.UniqueConstraint(fields=["study", "from_index"], name="episode_from_index_unique_in_study"),
        ]
        # The episodes list filtered by receipt status, and the dashboard's count by status.
        indexes = [models.Index(fields=["study", "receipt_status", "episode_index"], name="episode_list_receipt")]

    def __str__(self) -> str:
        return self.folder

    @property
    def folder(self) -> str:
        return f"episode-{self.episode_index:06d}"

    @property
    def prefix(self) -> str:
        """The shard's objects in the ``shards`` storage."""
        return f"{self.study.code}/{self.folder}/"

    @property
    def to_index(self) -> int:
        return self.from_index + self.length


class RecordingLog(models.Model):
    """The export log shown on the recording page: one line per step, retry or failure."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    recording = models.ForeignKey(Recording, on_delete=models.CASCADE, related_name="log")
    at = models.DateTimeField(auto_now_add=True)
    level = models.CharField(max_length=8, default="info")
    message = models.TextField()

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.level}: {self.message[:60]}"


class AudioKey(models.Model):
    """A recording's audio key, wrapped (RFC 3394) by the master key. Purging deletes this row."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    recording = models.OneToOneField(Recording, on_delete=models.PROTECT, related_name="audio_key")
    wrapped_key = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager(study="study")

    def __str__(self) -> str:
        return f"audio key of recording {self.recording_id}"


class PurgeReceipt(models.Model):
    """What raw audio was destroyed, when, by which rule, and its SHA-256 just before deletion."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    recording = models.ForeignKey(Recording, on_delete=models.PROTECT, related_name="purge_receipts")
    rule = models.CharField(max_length=80)  # the longest rule, "consent does not cover raw-audio retention", is 43
    purged_at = models.DateTimeField()
    objects_purged = models.JSONField(help_text="Per object: path, sha256 of the stored bytes, bytes.")
    key_destroyed = models.BooleanField()

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-purged_at"]

    def __str__(self) -> str:
        return f"audio purge of recording {self.recording_id} ({self.rule})"


class Verification(models.Model):
    """One re-hash of a stored shard against its receipt."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="verifications")
    checked_at = models.DateTimeField()
    ok = models.BooleanField()
    problems = models.JSONField(default=list)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-checked_at"]

    def __str__(self) -> str:
        return f"{self.episode_id}: {'ok' if self.ok else 'mismatch'} at {self.checked_at:%Y-%m-%d %H:%M}"
