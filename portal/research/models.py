"""The researcher's side of a study: access requests, acceptances of the data-use agreement, the download links
issued, and one-dataset downloads assembled from released episodes.

Access requests and acceptances are access-control records, read before a study scope exists (like
``RoleGrant``), so they are not scoped: every read names its study and user. Links and datasets are study data
with a ``ScopedManager``. State changes happen only in ``portal.research.services``.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django_scopes import ScopedManager

from portal.core.append_only import AppendOnlyModel, AppendOnlyQuerySet
from portal.core.leases import LeasedJob
from portal.core.states import StateMachineModel
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.research.exceptions import IllegalTransition
from portal.studies.models import DataUseAgreement, Study


class AgreementAcceptance(AppendOnlyModel):
    """A researcher accepted one version of a study's data-use agreement: the version and the SHA-256 of the
    exact text they were shown. Append-only: a new version is accepted with a new row."""

    append_only_hint = "; accept the agreement again instead"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    agreement = models.ForeignKey(DataUseAgreement, on_delete=models.PROTECT, related_name="acceptances")
    version = models.PositiveIntegerField()
    sha256 = models.CharField("SHA-256 of the text shown", max_length=64)
    accepted_at = models.DateTimeField(auto_now_add=True)

    objects = models.Manager.from_queryset(AppendOnlyQuerySet)()

    class Meta:
        ordering = ["-accepted_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["user", "agreement"], name="acceptance_once_per_version")]
        indexes = [models.Index(fields=["study", "user", "-version"], name="acceptance_latest")]

    def __str__(self) -> str:
        return f"{self.user} accepted {self.study_id} agreement v{self.version}"


class AccessRequest(StateMachineModel):
    """A researcher asks for access to a study's released data, with a purpose and an accepted agreement; a
    coordinator or ethics officer grants it until a date (a researcher ``RoleGrant`` with that expiry) or
    refuses it; a grant can be revoked."""

    class State(models.TextChoices):
        PENDING = "pending", "Awaiting a decision"
        GRANTED = "granted", "Granted"
        REFUSED = "refused", "Refused"
        REVOKED = "revoked", "Revoked"
        CANCELLED = "cancelled", "Cancelled by the researcher"

    illegal_transition = IllegalTransition
    TRANSITIONS = {
        State.PENDING: frozenset({State.GRANTED, State.REFUSED, State.CANCELLED}),
        State.GRANTED: frozenset({State.REVOKED}),
        State.REFUSED: frozenset(),
        State.REVOKED: frozenset(),
        State.CANCELLED: frozenset(),
    }

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # Both indexed as the first column of the lists' indexes below, not alone.
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="access_requests", db_index=False)
    researcher = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+",
                                   db_index=False)
    purpose = models.TextField()
    acceptance = models.ForeignKey(AgreementAcceptance, on_delete=models.PROTECT, related_name="+",
                                   help_text="The agreement version accepted with the request.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When a granted access ends.")
    reason = models.TextField(blank=True, help_text="Why it was refused or revoked.")
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["study", "researcher"], condition=Q(state="pending"),
                                    name="access_request_one_pending"),
        ]
        indexes = [models.Index(fields=["study", "-created_at", "-id"], name="access_request_all"),
                   models.Index(fields=["study", "state", "-created_at", "-id"], name="access_request_list"),
                   models.Index(fields=["researcher", "-created_at", "-id"], name="access_request_mine")]

    def __str__(self) -> str:
        return f"access request of {self.researcher} to {self.study}"

    def transition_refusal(self, state: str) -> str:
        return (f"the access request is {self.get_state_display().lower()}; it cannot become "
                f"{self.State(state).label.lower()}")


class Dataset(LeasedJob, StateMachineModel):
    """A one-dataset download: released episodes of one study assembled as one LeRobot v3 dataset, stored in the
    ``releases`` storage with a signed manifest. An identical selection reuses it."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"
        WITHDRAWN = "withdrawn", "Removed after a withdrawal"

    illegal_transition = IllegalTransition
    # A dataset holding a withdrawn demonstrator's episode is removed (from any state: a build under way must not
    # finish it); asking for the same selection again is refused, since the live check fails.
    TRANSITIONS = {
        State.QUEUED: frozenset({State.BUILDING, State.FAILED, State.WITHDRAWN}),
        State.BUILDING: frozenset({State.READY, State.FAILED, State.WITHDRAWN}),
        State.FAILED: frozenset({State.QUEUED, State.WITHDRAWN}),
        State.READY: frozenset({State.WITHDRAWN}),
        State.WITHDRAWN: frozenset(),
    }
    LEASE_SETTING, LEASE_JOB = "CERES_DATASET_LEASE_SECONDS", "dataset build"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    number = models.PositiveIntegerField(help_text="Counts the study's datasets from 1; names the dataset.")
    selection_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the chosen episodes and receipts.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    episode_count = models.PositiveIntegerField()
    phase = models.CharField(max_length=20, blank=True, help_text="What the build is doing now.")
    done = models.PositiveIntegerField(default=0, help_text="Steps of the current phase done.")
    total = models.PositiveIntegerField(default=0, help_text="Steps of the current phase.")
    files_total = models.PositiveIntegerField(default=0)
    bytes_total = models.PositiveBigIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    assembled_at = models.DateTimeField(null=True, blank=True,
                                        help_text="The assembly's created_at, fixed on the first attempt.")
    last_error = models.TextField(blank=True)
    manifest = models.BinaryField(blank=True, default=b"")
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    signature = models.BinaryField(blank=True, default=b"")
    key_fingerprint = models.CharField(max_length=64, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="dataset_number_unique"),
            models.UniqueConstraint(fields=["study", "selection_sha256"], name="dataset_selection_unique"),
        ]

    def __str__(self) -> str:
        return self.dataset_id

    def transition_refusal(self, state: str) -> str:
        return (f"{self.dataset_id} is {self.get_state_display().lower()}; it cannot become "
                f"{self.State(state).label.lower()}")

    @property
    def dataset_id(self) -> str:
        return f"dataset-{self.number:04d}"

    @property
    def prefix(self) -> str:
        """Every object of this dataset in the ``releases`` storage lives under this prefix."""
        return f"datasets/{self.study.code}/{self.dataset_id}/"


class DatasetEpisode(models.Model):
    """One released episode of a dataset: the release item it is copied from and its index in the dataset."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="episodes")
    item = models.ForeignKey(ReleaseItem, on_delete=models.PROTECT, related_name="+")
    episode_index = models.PositiveIntegerField(help_text="The episode's index in the assembled dataset.")

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["episode_index"]
        constraints = [models.UniqueConstraint(fields=["dataset", "episode_index"], name="dataset_episode_unique")]

    def __str__(self) -> str:
        return f"{self.dataset} episode {self.episode_index}"


class DatasetRequester(models.Model):
    """Who asked for a dataset, and when: identical selections of several researchers share one dataset."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="requesters")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-requested_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["dataset", "user"], name="dataset_requester_unique")]
        indexes = [models.Index(fields=["study", "user", "-requested_at", "-id"], name="dataset_requester_mine")]

    def __str__(self) -> str:
        return f"{self.dataset} asked for by {self.user}"


class IssuedLink(models.Model):
    """A short-lived signed download link the portal issued: who, which object, of which release or dataset,
    when, and until when. Every row also has its audit event. A whole release or dataset sent as one ZIP
    (``via`` zip) has a row for each file it holds, so a withdrawal reaches whoever received it, and one audit
    event for the download."""

    class Via(models.TextChoices):
        PAGE = "page", "Portal page"
        API = "api", "API"
        ZIP = "zip", "One ZIP download"

    # Each indexed as the first column of one of the indexes below, not alone.
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", db_index=False)
    release = models.ForeignKey(ReleaseRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                db_index=False)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                db_index=False)
    episode_index = models.PositiveIntegerField(null=True, blank=True,
                                                help_text="The study episode a release file belongs to.")
    path = models.CharField(max_length=500, help_text="The file's path in the release or dataset folder.")
    object_name = models.CharField(max_length=700, help_text="The object's key in the releases storage.")
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    via = models.CharField(max_length=4, choices=Via.choices)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-issued_at", "-pk"]
        constraints = [
            models.CheckConstraint(name="issued_link_one_target",
                                   condition=Q(release__isnull=False, dataset__isnull=True)
                                   | Q(release__isnull=True, dataset__isnull=False)),
        ]
        indexes = [models.Index(fields=["-issued_at", "-id"], name="issued_link_all"),
                   models.Index(fields=["study", "-issued_at", "-id"], name="issued_link_study"),
                   models.Index(fields=["user", "-issued_at", "-id"], name="issued_link_mine"),
                   models.Index(fields=["study", "episode_index"], name="issued_link_episode"),
                   models.Index(fields=["release", "path"], name="issued_link_release"),
                   models.Index(fields=["dataset", "path"], name="issued_link_dataset")]

    def __str__(self) -> str:
        return f"link to {self.path} for {self.user}"


class Withdrawal(LeasedJob, StateMachineModel):
    """What a consent withdrawal reached and what was done about it: the episodes no longer covered, the releases
    and one-dataset downloads holding them, the researchers who were issued links to them; their objects removed,
    superseding releases issued, tombstones left and the researchers told (``services.withdrawals``)."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Working"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    illegal_transition = IllegalTransition
    TRANSITIONS = {
        State.QUEUED: frozenset({State.RUNNING}),
        State.RUNNING: frozenset({State.DONE, State.FAILED}),
        State.FAILED: frozenset({State.RUNNING}),
        State.DONE: frozenset(),
    }
    LEASE_SETTING, LEASE_JOB = "CERES_WITHDRAWAL_LEASE_SECONDS", "withdrawal"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    event = models.OneToOneField("studies.ConsentEvent", on_delete=models.PROTECT, related_name="withdrawal_job")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    phase = models.CharField(max_length=40, blank=True)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    reach = models.JSONField(default=dict, blank=True, help_text="Episodes, releases, datasets, researchers.")
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["study", "-created_at", "-id"], name="withdrawal_list")]

    def __str__(self) -> str:
        return f"withdrawal {self.pk}"

    def transition_refusal(self, state: str) -> str:
        return (f"the withdrawal job is {self.get_state_display().lower()}; it cannot become "
                f"{self.State(state).label.lower()}")


class Tombstone(models.Model):
    """Which episode indexes left which release (or which dataset was removed), when and why: content-free (no
    designator, no headset, no personal value), kept in the database and beside the release in storage."""

    REASON = "consent withdrawn"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    withdrawal = models.ForeignKey(Withdrawal, on_delete=models.PROTECT, related_name="tombstones")
    release = models.ForeignKey(ReleaseRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    superseded_by = models.ForeignKey(ReleaseRequest, on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="+")
    episode_indexes = models.JSONField(help_text="The study episode indexes that left.")
    removed_at = models.DateTimeField()
    object_name = models.CharField(max_length=700, blank=True, help_text="The signed tombstone in storage.")
    content = models.BinaryField(default=b"", help_text="The tombstone's exact bytes, as stored.")
    signature = models.BinaryField(default=b"", help_text="Its raw Ed25519 signature, as stored beside it.")

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["-removed_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["withdrawal", "release"], name="tombstone_once_per_release"),
            models.UniqueConstraint(fields=["withdrawal", "dataset"], name="tombstone_once_per_dataset"),
        ]

    def __str__(self) -> str:
        return f"tombstone of {self.release or self.dataset}"


class WithdrawalNotice(models.Model):
    """The email a researcher was sent about a withdrawal: which files to delete. Sent once."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="+")
    withdrawal = models.ForeignKey(Withdrawal, on_delete=models.PROTECT, related_name="notices")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    files = models.JSONField(help_text="What to delete: release/dataset and paths.")
    sent_at = models.DateTimeField(null=True, blank=True, help_text="None: the researcher has no email address.")

    objects = ScopedManager(study="study")

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["withdrawal", "user"], name="withdrawal_notice_once")]

    def __str__(self) -> str:
        return f"notice to {self.user} of {self.withdrawal}"
