"""Release requests, their frozen episodes, the ethics officers' approvals and the executed release.

Every model carries ``study`` and a ``ScopedManager``. State changes happen only in
``portal.releases.services``; a request's moves are the ones in ``ReleaseRequest.TRANSITIONS``.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django_scopes import ScopedManager

from exporter.layout import episode_folder
from portal.core.leases import LeasedJob
from portal.core.states import StateMachineModel
from portal.recordings.models import Episode
from portal.releases.exceptions import IllegalTransition
from portal.studies.models import Study


class EpisodeTag(models.Model):
    """A task or an outcome of an episode's retained segments: what the release request page filters on."""

    class Kind(models.TextChoices):
        TASK = "task", "Task"
        OUTCOME = "outcome", "Outcome"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="tags")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    value = models.CharField(max_length=500)

    objects = ScopedManager(study="study")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "kind", "value"], name="episode_tag_unique")]
        indexes = [models.Index(fields=["study", "kind", "value"])]

    def __str__(self) -> str:
        return f"{self.kind}: {self.value}"


class ReleaseRequest(StateMachineModel):
    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
        APPROVED = "approved", "Approved"
        RELEASING = "releasing", "Releasing"
        RELEASED = "released", "Released"
        REJECTED = "rejected", "Rejected"
        FAILED = "failed", "Release failed"
        SUPERSEDED = "superseded", "Superseded after a withdrawal"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="release_requests")
    number = models.PositiveIntegerField(help_text="Counts the study's requests from 1; names the release.")
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT)
    purpose = models.TextField()
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # What the manifest names, frozen when the request is made: a later rename of the study or the requester
    # changes neither what the officers approve nor what is signed.
    study_code = models.CharField(max_length=40, help_text="The study's code when the request was made.")
    requested_by_name = models.CharField(max_length=150, help_text="The requester's username when the request "
                                                                   "was made.")
    approvals_required = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Distinct ethics officers' approvals it needs: the study's number when it "
                                         "was submitted.")
    face_policy = models.CharField(
        max_length=8, blank=True, db_default="",
        help_text="The study's face policy when the request was made (blank: made before faces were looked for, no "
                  "face check).")
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    manifest_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the manifest officers are shown.")
    episode_count = models.PositiveIntegerField()
    decided_at = models.DateTimeField(null=True, blank=True, help_text="When it was approved or rejected.")
    rejected_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    reason = models.TextField(blank=True, help_text="Why it was rejected, or why the release failed.")
    supersedes = models.OneToOneField("self", on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="superseded_by",
                                      help_text="The release this one replaces after a consent withdrawal.")
    # Of a release made by a withdrawal (empty otherwise, and for those made before it was kept): the release it
    # supersedes (``release_id``, ``number``, ``manifest_sha256``), the ``withdrawal`` (its id) and the approvals it
    # carries (``officer``, ``approved_at``, ``manifest_sha256`` each officer approved), as its manifest names them.
    superseding = models.JSONField(default=dict, blank=True,
                                   help_text="What the release it supersedes, the withdrawal and the approvals it "
                                             "carries are, as its manifest names them.")

    # The moves a request may make, and nothing else. A failed release may be tried again; nothing is
    # approved by timeout; a rejected request never moves again, and a released one only to superseded, when a
    # withdrawal took episodes out of it (its superseding release holds the others).
    TRANSITIONS: dict[str, frozenset[str]] = {
        State.DRAFT: frozenset({State.AWAITING_APPROVAL, State.REJECTED}),
        State.AWAITING_APPROVAL: frozenset({State.APPROVED, State.REJECTED}),
        State.APPROVED: frozenset({State.RELEASING}),
        State.RELEASING: frozenset({State.RELEASED, State.FAILED}),
        State.FAILED: frozenset({State.RELEASING}),
        State.RELEASED: frozenset({State.SUPERSEDED}),
        State.REJECTED: frozenset(),
        State.SUPERSEDED: frozenset(),
    }
    OPEN = frozenset({State.DRAFT, State.AWAITING_APPROVAL})
    illegal_transition = IllegalTransition

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["study", "number"], name="release_request_number_unique")]
        indexes = [models.Index(fields=["study", "state", "number"]),
                   models.Index(fields=["study", "requested_by", "number"])]

    def __str__(self) -> str:
        return self.release_id

    @property
    def withdrawn_by_requester(self) -> bool:
        """Rejected by its own requester: the requester withdrew it (shown so, not as "Rejected")."""
        return self.state == self.State.REJECTED and self.rejected_by_id is not None \
            and self.rejected_by_id == self.requested_by_id

    @property
    def release_id(self) -> str:
        return f"release-{self.number:04d}"

    @property
    def approvals_needed(self) -> int:
        """The number frozen at submission; for a draft, the study's number now (it is frozen when submitted)."""
        return self.approvals_required if self.approvals_required is not None else self.study.approvals_required

    @property
    def prefix(self) -> str:
        """Every object of this release in the ``releases`` storage lives under this prefix."""
        return f"releases/{self.study.code}/{self.release_id}/"

    def transition_refusal(self, state: str) -> str:
        return (f"{self.release_id} is {self.get_state_display().lower()}; it cannot become "
                f"{self.State(state).label.lower()}")


class ReleaseItem(models.Model):
    """One episode of a request, frozen when the request was made: its receipt digest and every file."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    # Indexed as the first column of the unique (request, episode) pair, not alone.
    request = models.ForeignKey(ReleaseRequest, on_delete=models.CASCADE, related_name="items", db_index=False)
    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="release_items")
    episode_index = models.PositiveIntegerField()
    capture_id = models.CharField(max_length=128, help_text="The recording's capture id when the request was made.")
    receipt_sha256 = models.CharField(max_length=64)
    files = models.JSONField(help_text="The shard's files, receipt included: path, bytes, sha256.")
    inspected_at = models.DateTimeField(null=True, blank=True,
                                        help_text="When the stored shard's bytes were read for the gate.")
    video_has_audio = models.BooleanField(null=True, blank=True,
                                          help_text="Whether the stored video has an audio stream (null: no video).")
    leaks = models.JSONField(default=list, blank=True,
                             help_text="Raw device identifiers or user-agent strings found in the stored shard.")
    inspection_error = models.TextField(blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["episode_index"]
        constraints = [models.UniqueConstraint(fields=["request", "episode"], name="release_item_unique")]
        # Researchers' browse: the released episodes newest release first (keyset on request, episode index).
        indexes = [models.Index(fields=["study", "-request", "-episode_index"], name="release_item_browse")]

    def __str__(self) -> str:
        return self.folder

    @property
    def folder(self) -> str:
        return episode_folder(self.episode_index)


class Approval(models.Model):
    """One ethics officer's approval of a request: who (their name frozen as the manifest names it), when, and the
    manifest digest they were shown."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    request = models.ForeignKey(ReleaseRequest, on_delete=models.PROTECT, related_name="approvals")
    officer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    officer_name = models.CharField(max_length=150, help_text="The officer's username when they approved.")
    approved_at = models.DateTimeField()
    manifest_sha256 = models.CharField(max_length=64)
    carried_over_from = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                          help_text="The approval of the superseded release this one carries over.")

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["approved_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["request", "officer"], name="approval_once_per_officer")]

    def __str__(self) -> str:
        return f"{self.request} approved by {self.officer}"


class Release(LeasedJob):
    """The executed release: objects copied to the ``releases`` storage, the signed manifest, progress."""

    LEASE_SETTING, LEASE_JOB = "CERES_RELEASE_LEASE_SECONDS", "release"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    request = models.OneToOneField(ReleaseRequest, on_delete=models.PROTECT, related_name="release")
    prefix = models.CharField(max_length=300)
    objects_total = models.PositiveIntegerField(
        help_text="Shard files, the dataset card and metadata files, the manifest and its signature.")
    objects_copied = models.PositiveIntegerField(default=0, help_text="Objects in place and checked.")
    objects_found = models.PositiveIntegerField(
        default=0, help_text="Of those, objects an interrupted attempt had already stored with the right digest.")
    progress_note = models.CharField(
        max_length=200, blank=True,
        help_text="What the job is doing before its copies start (under the redact face policy: the episode being "
                  "redacted and how far its video is).")
    attempts = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    last_error = models.TextField(blank=True)
    manifest = models.BinaryField(blank=True, default=b"", help_text="The manifest's exact bytes, once signed.")
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    signature = models.BinaryField(blank=True, default=b"", help_text="Raw Ed25519 signature of the manifest.")
    card_files = models.JSONField(
        default=dict, blank=True,
        help_text="The dataset card and metadata files at the release's root (name to UTF-8 text), made once with "
                  "the manifest that lists them, so a re-run uploads the same bytes.")
    key_fingerprint = models.CharField(max_length=64, blank=True)
    signed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager(study="study")

    def __str__(self) -> str:
        return f"release of {self.request}"
