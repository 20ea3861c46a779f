"""A study the size of a year's work, for measuring lists and drills: ``manage.py seed_scale``.

Everything is written through the models (``bulk_create`` in batches) and every row that a service would
have audited gets the event that service records, appended through the audit service's bulk path
(``record_many``), so ``audit_verify`` passes afterwards. The study, its users, grants and consent document
go through the services themselves. One transaction: a failure leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import connection, models, transaction
from django.utils import timezone
from django_scopes import scope

from exporter.designator import generate_designator
from exporter.receipt import RECEIPT
from portal.access.models import Role
from portal.access.services import grant_role
from portal.audit.services import Entry, record_many
from portal.fixity.models import Alert
from portal.recordings.models import Episode, Recording, RecordingLog, StudyDataset, Verification
from portal.recordings.services.history import snapshot
from portal.releases.models import Approval, Release, ReleaseItem, ReleaseRequest
from portal.releases.services import manifest
from portal.releases.services.release_requests import snapshot as release_snapshot
from portal.studies.models import ConsentEvent, Demonstrator, Headset, Study
from portal.studies.services.consent import accept_consent_document, upload_consent_document
from portal.studies.services.study import create_study

State = Recording.State
BATCH = 5000
# How the recordings of a year-old study are spread over states (shares of all recordings). The in-flight
# ones are the most recent; everything else is spread over the year.
STATE_SHARES = {
    State.VERIFIED: 0.893, State.QUARANTINED: 0.045, State.REJECTED: 0.025, State.DUPLICATE: 0.020,
    State.FAILED: 0.008, State.EXPORTED: 0.004, State.QUEUED: 0.003, State.RUNNING: 0.001, State.RECEIVED: 0.001,
}
IN_FLIGHT_LAST = (State.QUEUED, State.RUNNING, State.EXPORTED, State.RECEIVED)
# The moves each final state took from ingest (the actions ``services`` record for them).
PATHS = {
    State.RECEIVED: [],
    State.REJECTED: [(State.REJECTED, "recording.rejected")],
    State.QUARANTINED: [(State.QUARANTINED, "recording.quarantined")],
    State.DUPLICATE: [(State.DUPLICATE, "recording.duplicate")],
    State.QUEUED: [(State.QUEUED, "recording.accepted")],
    State.RUNNING: [(State.QUEUED, "recording.accepted"), (State.RUNNING, "recording.export_started")],
    State.FAILED: [(State.QUEUED, "recording.accepted"), (State.RUNNING, "recording.export_started"),
                   (State.FAILED, "recording.export_failed")],
    State.EXPORTED: [(State.QUEUED, "recording.accepted"), (State.RUNNING, "recording.export_started"),
                     (State.EXPORTED, "recording.exported")],
    State.VERIFIED: [(State.QUEUED, "recording.accepted"), (State.RUNNING, "recording.export_started"),
                     (State.EXPORTED, "recording.exported"), (State.VERIFIED, "recording.verified")],
}
WITH_EPISODE = {State.RUNNING, State.EXPORTED, State.VERIFIED}
SHARD_FILES = ["data/chunk-000/file-000.parquet", "meta/info.json", "meta/stats.json", "meta/tasks.parquet",
               "meta/episodes/chunk-000/file-000.parquet", "videos/observation.images.camera/chunk-000/file-000.mp4"]
TASKS = ["pick up the cup and place it on the tray", "open the drawer", "pour water into the glass",
         "stack the blocks", "wipe the table"]


class SeedRefused(Exception):
    """The seeding would not make the study asked for (it exists, or the numbers do not fit)."""


@dataclass(frozen=True)
class SeedReport:
    study: Study
    recordings: int
    episodes: int
    audit_events: int
    logins: dict[str, str]
    release_requests: int = 0


@contextlib.contextmanager
def _stamped_by_hand(*fields: models.DateTimeField) -> Iterator[None]:
    """Let ``bulk_create`` keep the times given (a year of history) instead of stamping now."""
    saved = [(field, field.auto_now, field.auto_now_add) for field in fields]
    for field in fields:
        field.auto_now = field.auto_now_add = False
    try:
        yield
    finally:
        for field, auto_now, auto_now_add in saved:
            field.auto_now, field.auto_now_add = auto_now, auto_now_add


def _field(model: type[models.Model], name: str) -> models.DateTimeField:
    return model._meta.get_field(name)


def _sha(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


class _Seeder:
    def __init__(self, study: Study, coordinator, *, rng: random.Random, now: datetime):
        self.study, self.coordinator, self.rng, self.now = study, coordinator, rng, now
        self.start = now - timedelta(days=365)

    # --- registry ---------------------------------------------------------------------------------

    def headsets(self, count: int) -> list[Headset]:
        models_ = ["Quest 3", "Quest Pro", "Vision Pro", "Pico 4 Ultra"]
        headsets = [Headset(study=self.study, headset_id=f"HS-{number:04d}", model=models_[number % len(models_)],
                            registered_by=self.coordinator,
                            registered_at=self.start - timedelta(days=30, minutes=number),
                            assigned_on=(self.start - timedelta(days=30)).date(),
                            retired_on=(self.now - timedelta(days=self.rng.randint(1, 200))).date()
                            if number % 20 == 0 else None)
                    for number in range(1, count + 1)]
        with _stamped_by_hand(_field(Headset, "registered_at")):
            headsets = Headset.objects.bulk_create(headsets, batch_size=BATCH)
        record_many(Entry(self.coordinator, "headset.registered", headset,
                          after={"headset_id": headset.headset_id, "model": headset.model,
                                 "assigned_on": headset.assigned_on, "retired_on": None})
                    for headset in headsets)
        return headsets

    def demonstrators(self, count: int, headsets: list[Headset]) -> list[Demonstrator]:
        taken: set[str] = set()
        demonstrators = []
        for number in range(count):
            headset = headsets[number % len(headsets)] if headsets else None
            designator = generate_designator(headset.headset_id if headset else None, taken.__contains__)
            taken.add(designator)
            demonstrators.append(Demonstrator(study=self.study, designator=designator, headset=headset,
                                              created_by=self.coordinator,
                                              created_at=self.start - timedelta(days=20, minutes=number)))
        with _stamped_by_hand(_field(Demonstrator, "created_at")):
            demonstrators = Demonstrator.objects.bulk_create(demonstrators, batch_size=BATCH)
        record_many(Entry(self.coordinator, "demonstrator.created", demonstrator,
                          after={"designator": demonstrator.designator,
                                 "headset": demonstrator.headset.headset_id if demonstrator.headset else None})
                    for demonstrator in demonstrators)
        return demonstrators

    def consent(self, demonstrators: list[Demonstrator], ethics) -> set[int]:
        """Consent of every demonstrator to the accepted document; about 1 in 100 withdrew. Returns theirs."""
        document = upload_consent_document(self.coordinator, self.study, identifier="ICF-SCALE", version="1",
                                           uploaded_file=io.BytesIO(b"I agree to be recorded for this study.\n"),
                                           issued_on=(self.start - timedelta(days=60)).date())
        accept_consent_document(ethics, document)
        consent_date = (self.start - timedelta(days=10)).date()
        scopes = [ConsentEvent.Scope.EPISODE_RELEASE, ConsentEvent.Scope.RAW_AUDIO_RETENTION]
        events = [ConsentEvent(study=self.study, demonstrator=demonstrator, kind=ConsentEvent.Kind.GIVEN,
                               document=document, event_date=consent_date, scopes=scopes,
                               recorded_by=self.coordinator)
                  for demonstrator in demonstrators]
        withdrawn = {demonstrator.pk for demonstrator in demonstrators[::100]}
        events += [ConsentEvent(study=self.study, demonstrator=demonstrator, kind=ConsentEvent.Kind.WITHDRAWN,
                                event_date=(self.now - timedelta(days=30)).date(), reason="asked by e-mail",
                                recorded_by=self.coordinator)
                   for demonstrator in demonstrators if demonstrator.pk in withdrawn]
        events = ConsentEvent.objects.bulk_create(events, batch_size=BATCH)
        record_many(Entry(self.coordinator, f"consent.{event.kind}", event,
                          after={"demonstrator": event.demonstrator.designator, "kind": event.kind,
                                 "event_date": event.event_date, "document": str(document) if event.document else None,
                                 "scopes": event.scopes, "reason": event.reason})
                    for event in events)
        return withdrawn

    # --- recordings ---------------------------------------------------------------------------------

    def states(self, count: int) -> list[str]:
        counts = {state: int(share * count) for state, share in STATE_SHARES.items()}
        counts[State.VERIFIED] += count - sum(counts.values())
        settled = [state for state, n in counts.items() if state not in IN_FLIGHT_LAST for _ in range(n)]
        self.rng.shuffle(settled)
        return settled + [state for state in IN_FLIGHT_LAST for _ in range(counts[state])]

    def recordings(self, count: int, headsets: list[Headset], demonstrators: list[Demonstrator]) -> tuple[int, int]:
        """Recordings in batches, each with its episode, log lines, verification and audit events."""
        states = self.states(count)
        step = (self.now - self.start) / max(count, 1)
        dataset = StudyDataset.objects.create(study=self.study, tasks=TASKS)
        episodes = 0
        originals: list[Recording] = []
        # A duplicate points at a recording stored before it: they are written last, once originals exist.
        duplicates = [n for n in range(count) if states[n] == State.DUPLICATE]
        others = [n for n in range(count) if states[n] != State.DUPLICATE]
        batches = [others[i:i + BATCH] for i in range(0, len(others), BATCH)]
        batches += [duplicates[i:i + BATCH] for i in range(0, len(duplicates), BATCH)]
        for numbers in batches:
            batch = [self._recording(number, states[number], self.start + step * number, headsets, demonstrators,
                                     originals)
                     for number in numbers]
            with _stamped_by_hand(_field(Recording, "created_at"), _field(Recording, "updated_at")):
                batch = Recording.objects.bulk_create(batch, batch_size=BATCH)
            originals.extend([r for r in batch if r.state == State.VERIFIED][: 1000 - len(originals)])
            made = self._episodes(batch, dataset)
            episodes += len(made)
            self._logs(batch, made)
            record_many(self._entries(batch, made))
        dataset.save()
        return count, episodes

    def _recording(self, number: int, state: str, at: datetime, headsets, demonstrators, originals) -> Recording:
        rng = self.rng
        headset = rng.choice(headsets)
        demonstrator = rng.choice(demonstrators)
        rows = rng.randint(1800, 18000)
        recording = Recording(
            uid=uuid.UUID(int=rng.getrandbits(128), version=4), study=self.study, state=state,
            via=rng.choice(["upload", "upload", "api", "inbox"]), original_name=f"capture-{number:06d}.zip",
            content_sha256=_sha(self.study.code, number), created_by=self.coordinator,
            created_at=at + timedelta(minutes=rng.randint(5, 60)), updated_at=at + timedelta(minutes=70),
            audio=rng.choice([Recording.Audio.NONE, Recording.Audio.NONE, Recording.Audio.STRIPPED]),
        )
        if state == State.REJECTED:
            recording.reason = "not a capture source: capture.json is missing"
            recording.audio = Recording.Audio.UNKNOWN
            return recording
        recording.capture_id = f"{self.study.code}-{number:06d}"
        recording.recorded_at = at
        recording.claims = {"headset_id": headset.headset_id, "demonstrator_id": demonstrator.designator,
                            "project_id": self.study.project_id, "consent_date": None, "consent_document_id": None}
        recording.summary = {"rate_hz": 30, "rows": rows, "segments": 1, "dropped_retries": 0,
                             "tasks": [rng.choice(TASKS)], "audio_in_source": recording.audio != "none",
                             "camera": {"selected": "camera", "width": 1280, "height": 720, "frames": rows},
                             "warnings": []}
        recording.source_files = [{"path": f"{self.study.code}/{recording.uid}/source/{name}", "name": name,
                                   "sha256": _sha(recording.uid, name), "bytes": rng.randint(10_000, 90_000_000)}
                                  for name in ("capture.json", "journal.jsonl", "camera.mp4", "tasks.json")]
        recording.headset, recording.demonstrator = headset, demonstrator
        if state == State.QUARANTINED:
            claimed = f"HS-9{number % 1000:03d}"
            recording.claims["headset_id"] = claimed
            recording.headset = None
            recording.reason = f"headset {claimed!r} is not registered in study {self.study.code}"
        elif state == State.DUPLICATE and (earlier := [o for o in originals if o.created_at < recording.created_at]):
            original = rng.choice(earlier)
            recording.duplicate_of, recording.content_sha256 = original, original.content_sha256
            recording.reason = f"the same capture source was already ingested as recording {original.uid}"
        elif state == State.DUPLICATE:
            recording.state = State.QUARANTINED
            recording.reason = "no consent of demonstrator covers the recording date"
        elif state == State.FAILED:
            recording.reason = "export failed: storage unavailable after 12 retries"
        elif state == State.RUNNING:
            recording.progress, recording.progress_note = 60, "uploading the shard"
            recording.lease_until = self.now + timedelta(minutes=10)
        elif state in (State.EXPORTED, State.VERIFIED):
            recording.progress, recording.progress_note = 100, "exported"
        return recording

    def _episodes(self, recordings: list[Recording], dataset: StudyDataset) -> dict[int, Episode]:
        episodes = []
        for recording in recordings:
            if recording.state not in WITH_EPISODE:
                continue
            allocated = recording.created_at + timedelta(minutes=1)
            episode = Episode(study=self.study, recording=recording, episode_index=dataset.next_episode_index,
                              from_index=dataset.next_frame_index, length=recording.summary["rows"],
                              task_count=len(TASKS), allocated_at=allocated)
            if recording.state != State.RUNNING:
                episode.exported_at = allocated + timedelta(minutes=3)
                episode.video_method = "remux"
                episode.receipt_sha256 = _sha("receipt", recording.uid)
                episode.shard_files = [{"path": path, "sha256": _sha(recording.uid, path),
                                        "bytes": self.rng.randint(1000, 50_000_000)} for path in SHARD_FILES]
            if recording.state == State.VERIFIED:
                episode.receipt_status = Episode.Receipt.VERIFIED
                episode.verified_at = episode.exported_at + timedelta(minutes=1)
                # Now and then a stored shard stopped matching its receipt at a later check: an alert.
                if episode.episode_index % 5000 == 4999:
                    episode.receipt_status = Episode.Receipt.MISMATCH
            dataset.next_episode_index += 1
            dataset.next_frame_index += episode.length
            episodes.append(episode)
        with _stamped_by_hand(_field(Episode, "allocated_at")):
            episodes = Episode.objects.bulk_create(episodes, batch_size=BATCH)
        verified = [episode for episode in episodes if episode.verified_at]
        Verification.objects.bulk_create(
            [Verification(study=self.study, episode=episode, checked_at=episode.verified_at, ok=True, problems=[])
             for episode in verified], batch_size=BATCH)
        broken = [episode for episode in verified if episode.receipt_status == Episode.Receipt.MISMATCH]
        problems = ["data/chunk-000/file-000.parquet: SHA-256 does not match the receipt"]
        Verification.objects.bulk_create([Verification(study=self.study, episode=episode, checked_at=self.now,
                                                       ok=False, problems=problems) for episode in broken])
        Alert.objects.bulk_create([Alert(study=self.study, episode=episode, kind=Alert.Kind.RECEIPT_MISMATCH,
                                         created_at=self.now,
                                         message=f"{episode.prefix}: shard does not match its receipt: {problems[0]}")
                                   for episode in broken])
        return {episode.recording_id: episode for episode in episodes}

    def _logs(self, recordings: list[Recording], episodes: dict[int, Episode]) -> None:
        lines = []
        for recording in recordings:
            at = recording.created_at
            episode = episodes.get(recording.pk)
            for state, action in PATHS[recording.state]:
                at += timedelta(seconds=30)
                text = recording.reason if state == recording.state and recording.reason else action.split(".")[1]
                if episode is not None and state == State.EXPORTED:
                    text = f"exported as {episode.folder}: {episode.length} rows, video {episode.video_method}"
                elif episode is not None and state == State.VERIFIED:
                    text = f"{episode.folder} verified against its receipt"
                level = "warning" if state in (State.QUARANTINED, State.REJECTED, State.FAILED) else "info"
                lines.append(RecordingLog(study=self.study, recording=recording, at=at, level=level, message=text))
        with _stamped_by_hand(_field(RecordingLog, "at")):
            RecordingLog.objects.bulk_create(lines, batch_size=BATCH)

    def _entries(self, recordings: list[Recording], episodes: dict[int, Episode]) -> Iterator[Entry]:
        for recording in recordings:
            final = snapshot(recording)
            yield Entry(self.coordinator, "recording.received", recording,
                        after={"via": recording.via, "name": recording.original_name})
            before = {**final, "state": State.RECEIVED, "reason": ""}
            for state, action in PATHS[recording.state]:
                after = final if state == recording.state else {**final, "state": state, "reason": ""}
                actor = self.coordinator if action == "recording.accepted" else None
                yield Entry(actor, action, recording, before=before, after=after)
                episode = episodes.get(recording.pk)
                if state == State.RUNNING and episode is not None:
                    yield Entry(None, "episode.allocated", episode,
                                after={"episode_index": episode.episode_index, "from_index": episode.from_index,
                                       "length": episode.length, "task_count": episode.task_count})
                if state == State.EXPORTED and episode is not None and episode.verified_at:
                    yield Entry(None, "episode.verified", episode, before={"receipt_status": "pending"},
                                after={"receipt_status": Episode.Receipt.VERIFIED, "problems": []})
                before = after
            episode = episodes.get(recording.pk)
            if episode is not None and episode.receipt_status == Episode.Receipt.MISMATCH:
                yield Entry(None, "episode.verification_failed", episode, before={"receipt_status": "verified"},
                            after={"receipt_status": episode.receipt_status, "problems": ["SHA-256 mismatch"]})


    # --- release requests ---------------------------------------------------------------------------

    def release_requests(self, count: int, ethics, withdrawn: set[int]) -> int:
        """The coordinator's release requests over the year, each of 1 to 3 verified episodes of demonstrators
        who did not withdraw, whose shards the gate read: in turn a draft, one awaiting approval (every other one
        approved by one officer already, when the study needs more than one) and one an officer rejected.
        Returns how many."""
        Request = ReleaseRequest.State
        pool = list(Episode.objects.filter(receipt_status=Episode.Receipt.VERIFIED, recording__state=State.VERIFIED)
                    .exclude(recording__demonstrator__in=withdrawn)
                    .select_related("recording").order_by("episode_index")[:1000])
        if count and not pool:
            raise SeedRefused("release requests need verified episodes: seed more episodes")
        step = (self.now - self.start) / max(count, 1)
        states = [Request.DRAFT, Request.AWAITING_APPROVAL, Request.REJECTED]
        releases, chosen = [], []
        for number in range(1, count + 1):
            at = self.start + step * (number - 1) + timedelta(hours=1)
            episodes = sorted(self.rng.sample(pool, min(len(pool), self.rng.randint(1, 3))),
                              key=lambda episode: episode.episode_index)
            state = states[(number - 1) % len(states)]
            release = ReleaseRequest(uid=uuid.UUID(int=self.rng.getrandbits(128), version=4), study=self.study,
                                     number=number, state=state, requested_by=self.coordinator, created_at=at,
                                     study_code=self.study.code, requested_by_name=self.coordinator.get_username(),
                                     purpose=f"training set {number}: {self.rng.choice(TASKS)}",
                                     episode_count=len(episodes))
            if state != Request.DRAFT:
                release.submitted_at = at + timedelta(hours=2)
                release.approvals_required = self.study.approvals_required
            if state == Request.REJECTED:
                release.decided_at, release.rejected_by = at + timedelta(days=1), ethics
                release.reason = "the purpose does not match the consent given"
            releases.append(release)
            chosen.append(episodes)
        with _stamped_by_hand(_field(ReleaseRequest, "created_at")):
            releases = ReleaseRequest.objects.bulk_create(releases, batch_size=BATCH)
        items = {release.number: [ReleaseItem(
            study=self.study, request=release, episode=episode, episode_index=episode.episode_index,
            capture_id=episode.recording.capture_id, receipt_sha256=episode.receipt_sha256,
            inspected_at=release.created_at + timedelta(minutes=5),
            video_has_audio=False, leaks=[],
            files=[*episode.shard_files, {"path": RECEIPT, "bytes": 2048, "sha256": episode.receipt_sha256}])
            for episode in episodes] for release, episodes in zip(releases, chosen, strict=True)}
        ReleaseItem.objects.bulk_create([item for made in items.values() for item in made], batch_size=BATCH)
        for release in releases:
            release.manifest_sha256 = manifest.section_digest(release, items[release.number])
        ReleaseRequest.objects.bulk_update(releases, ["manifest_sha256"], batch_size=BATCH)
        awaiting = [release for release in releases if release.state == Request.AWAITING_APPROVAL]
        approved = awaiting[::2] if self.study.approvals_required > 1 else []
        Approval.objects.bulk_create([Approval(study=self.study, request=release, officer=ethics,
                                               officer_name=ethics.get_username(),
                                               approved_at=release.submitted_at + timedelta(hours=3),
                                               manifest_sha256=release.manifest_sha256) for release in approved])
        record_many(self._request_entries(releases, items, {release.pk for release in approved}, ethics))
        return len(releases)

    def _request_entries(self, releases: list[ReleaseRequest], items: dict[int, list[ReleaseItem]],
                         approved: set[int], ethics) -> Iterator[Entry]:
        """The events ``releases.services`` record for these requests: asked for, submitted, an approval given
        (of the study's required number), rejected."""
        Request = ReleaseRequest.State
        for release in releases:
            final = release_snapshot(release)
            drafted = {**final, "state": Request.DRAFT, "reason": ""}
            yield Entry(self.coordinator, "release.requested", release, after={
                **drafted, "purpose": release.purpose, "episodes": [item.folder for item in items[release.number]],
                "receipts": {item.folder: item.receipt_sha256 for item in items[release.number]}})
            if release.state == Request.DRAFT:
                continue
            submitted = {**final, "state": Request.AWAITING_APPROVAL, "reason": ""}
            yield Entry(self.coordinator, "release.submitted", release, before=drafted, after=submitted)
            if release.pk in approved:
                yield Entry(ethics, "release.approval_given", release, after={
                    "officer": ethics.get_username(), "manifest_sha256": release.manifest_sha256, "approvals": 1,
                    "required": self.study.approvals_required, "second_factor": "not required"})
            if release.state == Request.REJECTED:
                yield Entry(ethics, "release.rejected", release, before=submitted,
                            after={**final, "withdrawn_by_requester": False})


    # --- the researcher side -------------------------------------------------------------------------------

    def released(self, count: int, ethics, withdrawn: set[int], *, password: str) -> list[ReleaseRequest]:
        """``count`` published releases of 1 to 3 verified episodes each, approved by the study's two ethics
        officers (a second one is made for them), released: what researchers browse."""
        Request = ReleaseRequest.State
        if not count:
            return []
        second = get_user_model().objects.create_user(f"{self.study.code}-ethics2", password=password)
        grant_role("seed_scale", second, self.study, Role.ETHICS_OFFICER)
        pool = list(Episode.objects.filter(receipt_status=Episode.Receipt.VERIFIED, recording__state=State.VERIFIED)
                    .exclude(recording__demonstrator__in=withdrawn).select_related("recording")
                    .order_by("-episode_index")[:2000])
        if count and not pool:
            raise SeedRefused("releases need verified episodes: seed more episodes")
        first = (ReleaseRequest.objects.aggregate(last=models.Max("number"))["last"] or 0) + 1
        step = (self.now - self.start) / max(count, 1)
        made, chosen = [], []
        for offset in range(count):
            at = self.start + step * offset + timedelta(hours=5)
            episodes = sorted(self.rng.sample(pool, min(len(pool), self.rng.randint(1, 3))),
                              key=lambda episode: episode.episode_index)
            made.append(ReleaseRequest(uid=uuid.UUID(int=self.rng.getrandbits(128), version=4), study=self.study,
                                       number=first + offset, state=Request.RELEASED, requested_by=self.coordinator,
                                       study_code=self.study.code, requested_by_name=self.coordinator.get_username(),
                                       approvals_required=2, created_at=at, submitted_at=at + timedelta(hours=1),
                                       decided_at=at + timedelta(days=1), episode_count=len(episodes),
                                       purpose=f"released set {first + offset}: {self.rng.choice(TASKS)}"))
            chosen.append(episodes)
        with _stamped_by_hand(_field(ReleaseRequest, "created_at")):
            made = ReleaseRequest.objects.bulk_create(made, batch_size=BATCH)
        items = {release.number: [ReleaseItem(
            study=self.study, request=release, episode=episode, episode_index=episode.episode_index,
            capture_id=episode.recording.capture_id, receipt_sha256=episode.receipt_sha256,
            inspected_at=release.created_at + timedelta(minutes=5),
            video_has_audio=False, leaks=[],
            files=[*episode.shard_files, {"path": RECEIPT, "bytes": 2048, "sha256": episode.receipt_sha256}])
            for episode in episodes] for release, episodes in zip(made, chosen, strict=True)}
        ReleaseItem.objects.bulk_create([item for group in items.values() for item in group], batch_size=BATCH)
        for release in made:
            release.manifest_sha256 = manifest.section_digest(release, items[release.number])
        ReleaseRequest.objects.bulk_update(made, ["manifest_sha256"], batch_size=BATCH)
        Approval.objects.bulk_create([Approval(study=self.study, request=release, officer=officer,
                                               officer_name=officer.get_username(), approved_at=release.decided_at,
                                               manifest_sha256=release.manifest_sha256)
                                      for release in made for officer in (ethics, second)], batch_size=BATCH)
        Release.objects.bulk_create([Release(
            study=self.study, request=release, prefix=release.prefix,
            objects_total=sum(len(item.files) for item in items[release.number]) + 2,
            objects_copied=sum(len(item.files) for item in items[release.number]) + 2, attempts=1,
            manifest_sha256=_sha("manifest", release.number), key_fingerprint=_sha("key"),
            signed_at=release.decided_at + timedelta(minutes=10),
            finished_at=release.decided_at + timedelta(minutes=11))
            for release in made], batch_size=BATCH)
        record_many(entry for release in made for entry in (
            Entry(self.coordinator, "release.requested", release, after={"state": "draft", "purpose": release.purpose}),
            *(Entry(officer, "release.approval_given", release, after={"manifest_sha256": release.manifest_sha256})
              for officer in (ethics, second)),
            Entry(None, "release.published", release, after={"prefix": release.prefix})))
        return made

    def researchers(self, released: list[ReleaseRequest], *, links: int, access_requests: int, password: str):
        """A researcher granted for a year under the study's agreement, ``links`` links issued to them over the
        released files, and ``access_requests`` more researchers waiting for a decision."""
        from portal.research.models import IssuedLink
        from portal.research.services.access import grant_access, request_access
        from portal.studies.services.study import publish_data_use_agreement

        User = get_user_model()
        agreement = publish_data_use_agreement(self.coordinator, self.study,
                                               text=f"Data-use agreement of {self.study.code}: robot learning only.")
        researcher = User.objects.create_user(f"{self.study.code}-researcher", password=password)
        asked = request_access(researcher, self.study, purpose="policy training", version=agreement.version,
                               sha256=agreement.sha256)
        grant_access(self.coordinator, asked, expires_at=self.now + timedelta(days=365))
        for number in range(1, access_requests + 1):
            applicant = User.objects.create_user(f"{self.study.code}-applicant-{number:05d}", password=password)
            request_access(applicant, self.study, purpose=f"study {number}", version=agreement.version,
                           sha256=agreement.sha256)
        files = [(release, item.episode_index, f"{item.folder}/{entry['path']}")
                 for release in released for item in release.items.all() for entry in item.files]
        if links and not files:
            raise SeedRefused("links need released files: seed released releases")
        step = (self.now - self.start) / max(links, 1)
        rows = []
        for number in range(links):
            release, index, path = files[number % len(files)]
            at = self.start + step * number
            rows.append(IssuedLink(study=self.study, user=researcher, release=release, episode_index=index, path=path,
                                   object_name=release.prefix + path, issued_at=at,
                                   expires_at=at + timedelta(minutes=5), via=IssuedLink.Via.API))
        rows = IssuedLink.objects.bulk_create(rows, batch_size=BATCH)
        record_many(Entry(researcher, "research.link_issued", row.release, after={
            "link": row.pk, "object": row.object_name, "path": row.path, "via": row.via,
            "expires_at": row.expires_at.isoformat(), "release": row.release.release_id, "dataset": None})
            for row in rows)
        return researcher.get_username()


def _logins(study: Study, password: str) -> tuple[dict[str, str], object, object]:
    User = get_user_model()
    names = {"coordinator": f"{study.code}-coordinator", "ethics": f"{study.code}-ethics",
             "admin": f"{study.code}-admin"}
    taken = sorted(User.objects.filter(username__in=names.values()).values_list("username", flat=True))
    if taken:
        raise SeedRefused(f"user(s) {', '.join(taken)} already exist; choose another study code")
    coordinator = User.objects.create_user(names["coordinator"], password=password)
    ethics = User.objects.create_user(names["ethics"], password=password)
    User.objects.create_superuser(names["admin"], password=password)
    grant_role("seed_scale", coordinator, study, Role.COORDINATOR)
    grant_role("seed_scale", ethics, study, Role.ETHICS_OFFICER)
    return names, coordinator, ethics


def _fill(count: int, users: list, rng: random.Random) -> Iterator[Entry]:
    """Sign-ins of the study's people: the bulk of a year's audit log besides the recordings' own events."""
    for _ in range(count):
        user = rng.choice(users)
        yield Entry(user, "accounts.login", user, after={"ip": f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"})


def seed_study(code: str, *, episodes: int, audit_events: int | None = None, headsets: int = 500,
               demonstrators: int = 2000, release_requests: int = 0, released: int = 0, links: int = 0,
               access_requests: int = 0, password: str, seed: int = 1) -> SeedReport:
    """Create study ``code`` holding ``episodes`` recordings in realistic states (those past export with their
    episode), ``release_requests`` release requests of its verified episodes, and exactly ``audit_events`` new
    audit events in all (sign-ins fill up to it; ``None``: only the events of what was seeded); ``SeedRefused``
    if the study exists or the events would not fit."""
    if episodes < 1 or headsets < 1 or demonstrators < 1:
        raise SeedRefused("--episodes, --headsets and --demonstrators must each be at least 1")
    if min(release_requests, released, links, access_requests) < 0:
        raise SeedRefused("--release-requests, --released, --links and --access-requests cannot be negative")
    if Study.objects.filter(code=code).exists():
        raise SeedRefused(f"study {code!r} already exists: seed another code, or a fresh database")
    from portal.audit.models import AuditEvent

    rng = random.Random(f"{seed}:{code}")  # the same data for the same numbers; other studies differ
    with transaction.atomic():
        first_seq = (AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0) + 1
        study = create_study("seed_scale", code=code, title=f"Scale study {code}: a year of recordings",
                             project_id=f"{code.upper()}-PROJECT", status=Study.Status.ACTIVE)
        logins, coordinator, ethics = _logins(study, password)
        now = timezone.now()
        with scope(study=study):
            seeder = _Seeder(study, coordinator, rng=rng, now=now)
            registered = seeder.headsets(headsets)
            people = seeder.demonstrators(demonstrators, registered)
            withdrawn = seeder.consent(people, ethics)
            recordings, made = seeder.recordings(episodes, registered, people)
            requested = seeder.release_requests(release_requests, ethics, withdrawn)
            published = seeder.released(released, ethics, withdrawn, password=password)
            if released or links or access_requests:
                logins["researcher"] = seeder.researchers(published, links=links, access_requests=access_requests,
                                                          password=password)
        written = AuditEvent.objects.filter(seq__gte=first_seq).count()
        if audit_events is None:
            audit_events = written
        if written > audit_events:
            raise SeedRefused(f"--audit-events {audit_events} is fewer than the {written} events these recordings "
                              f"and this registry need; ask for at least {written}")
        record_many(_fill(audit_events - written, [coordinator, ethics], rng))
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return SeedReport(study=study, recordings=recordings, episodes=made, audit_events=audit_events, logins=logins,
                      release_requests=requested)

