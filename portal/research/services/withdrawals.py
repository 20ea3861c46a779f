"""A consent withdrawal that reaches released data (governance section 8).

A withdrawal of consent starts here, by name: ``withdraw_consent`` (called by the demonstrator page's form and the
consent-events API, ``research/views/withdrawals.py`` and ``research/api/withdrawals.py``) records it in the
registry (``studies.services.consent.record_withdrawal``), purges the demonstrator's kept raw audio once it commits
(``recordings.services.audio``) and, in the same transaction, opens a ``Withdrawal`` whose job is queued. From that
commit on no link is issued for the demonstrator's episodes: link issuance locks the demonstrators' rows and reads
consent after the lock (``links._issue``), so a request racing the withdrawal either committed before it (and is in
the reach) or sees it and is refused.

The job (``apply_withdrawal``, a task) then, each step idempotent so a re-run changes nothing:

1. computes and stores the **reach**: the demonstrator's episodes that consent no longer covers, the releases and
   one-dataset downloads holding them, the open release requests holding them, and the researchers who were
   issued links to their files (with those files);
2. removes the episodes' objects from every release in the ``releases`` storage, leaves a signed, content-free
   **tombstone** beside each release, and supersedes each published one (``releases.services.supersede``: a new
   request of its other episodes, back to review unless the study carries approvals over);
3. rejects the open requests holding them;
4. removes every one-dataset download holding them (all its objects; the dataset is marked withdrawn);
5. tells each affected researcher which files to delete (once): in their portal inbox whether or not they have
   an email address, and by email where they have one (Django's email, the console by default).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone
from django_scopes import scope

from exporter import release as release_format
from exporter.layout import episode_folder
from exporter.receipt import bytes_digest
from exporter.timestamps import rfc3339
from portal.audit.services import record
from portal.core import leases, queue, signing, storage
from portal.core.states import transition
from portal.recordings.models import Episode
from portal.recordings.services import audio
from portal.releases.models import ReleaseItem, ReleaseRequest
from portal.releases.services import gate, redacted
from portal.releases.services.supersede import reject_open, supersede
from portal.research import notices
from portal.research.models import Dataset, DatasetEpisode, IssuedLink, Tombstone, Withdrawal, WithdrawalNotice
from portal.studies.models import ConsentEvent, Demonstrator
from portal.studies.services import consent

State = Withdrawal.State
ReleaseState = ReleaseRequest.State
# A release whose folder may still hold the episodes' objects: published, or superseded by an earlier withdrawal
# (its other episodes' objects stay).
HOLDING = (ReleaseState.RELEASED, ReleaseState.SUPERSEDED)
REASON = Tombstone.REASON


@transaction.atomic
def withdraw_consent(actor, demonstrator: Demonstrator, *, withdrawal_date: date, reason: str) -> ConsentEvent:
    """Withdraw all the demonstrator's consent from ``withdrawal_date`` on, in one transaction (so consent stands
    withdrawn exactly when its withdrawal job exists):

    1. the registry records the withdrawal event (``consent.record_withdrawal``, which refuses a bad date or reason);
    2. once it commits, the demonstrator's kept raw audio is purged (storage objects go only after the commit);
    3. the withdrawal job is opened and queued once it commits (``open_withdrawal``; the job is ``apply_withdrawal``).
    """
    with scope(study=demonstrator.study):
        event = consent.record_withdrawal(actor, demonstrator, withdrawal_date=withdrawal_date, reason=reason)
        transaction.on_commit(lambda: _purge_audio(demonstrator))
        open_withdrawal(event)
    return event


def _purge_audio(demonstrator: Demonstrator) -> None:
    with scope(study=demonstrator.study):
        audio.purge_for_withdrawal(demonstrator)


def open_withdrawal(event) -> Withdrawal:
    """Called in the withdrawal's own transaction: the job is queued once it commits."""
    withdrawal, made = Withdrawal.objects.get_or_create(study=event.study, event=event)
    if made:
        record(None, "research.withdrawal_opened", withdrawal, study=event.study,
               after={"event": event.pk, "withdrawal_date": event.event_date})
        queue.enqueue("research.apply_withdrawal", withdrawal.pk)
    return withdrawal


def withdrawal_of(release: ReleaseRequest) -> int | None:
    """The withdrawal that made a superseding release made before requests named it: from its tombstone
    (registered with ``releases.made_by`` by ``research/apps.py``)."""
    return Tombstone.objects.filter(superseded_by=release).values_list("withdrawal_id", flat=True).first()


def _move(withdrawal: Withdrawal, state: str, *, action: str, after: dict | None = None, if_allowed: bool = False,
          **fields) -> None:
    """``core.states.transition`` by the system; the audit event records the state before and after."""
    transition(None, withdrawal, state, action=action, after=after, if_allowed=if_allowed, **fields)


def claim(withdrawal_id: int) -> Withdrawal | None:
    """Take the job's lease; None when it is done."""
    with transaction.atomic():
        withdrawal = leases.lock(Withdrawal, "study", "event", pk=withdrawal_id)
        if withdrawal.state == State.DONE:
            return None
        lease = leases.take(withdrawal)  # only a running job holds one
        if withdrawal.state == State.RUNNING:
            withdrawal.save()
        else:
            _move(withdrawal, State.RUNNING, action="research.withdrawal_started",
                  after={"attempt": withdrawal.attempts}, **lease)
        return withdrawal


def _progress(withdrawal: Withdrawal, phase: str, done: int, total: int) -> None:
    leases.renew(withdrawal, phase=phase, done=done, total=total)


def apply_withdrawal(withdrawal_id: int) -> Withdrawal | None:
    """Run (or finish) the job; storage errors propagate, so the task retries with backoff."""
    withdrawal = claim(withdrawal_id)
    if withdrawal is None:
        return None
    if not withdrawal.reach:
        withdrawal.reach = compute_reach(withdrawal)
        Withdrawal.objects.filter(pk=withdrawal.pk).update(reach=withdrawal.reach)
        record(None, "research.withdrawal_reach", withdrawal, after=_summary(withdrawal.reach))
    reach = withdrawal.reach
    withdrawn = set(reach["episodes"])
    releases = list(ReleaseRequest.objects.filter(pk__in=[r["id"] for r in reach["releases"]]).select_related(
        "study").order_by("number"))
    for done, release in enumerate(releases, start=1):
        _progress(withdrawal, "releases", done - 1, len(releases))
        _withdraw_from_release(withdrawal, release, withdrawn)
    # The derived (redacted) shards a redact release made of the withdrawn episodes go as those of the released
    # ones do (in _withdraw_from_release), whatever became of the release: one that failed keeps them for a retry,
    # one still to run stops at its consent check.
    made = ReleaseItem.objects.filter(request__study_id=withdrawal.study_id, request__face_policy="redact",
                                      episode_index__in=withdrawn).exclude(request__state__in=HOLDING)
    for uid, index in made.order_by("request__number", "episode_index").values_list("request__uid", "episode_index"):
        storage.delete_prefix(storage.shards(), f"{redacted.PREFIX}{uid}/{episode_folder(index)}/")
    for open_release in ReleaseRequest.objects.filter(pk__in=reach["open_requests"]):
        reject_open(open_release, reason=_open_reason(open_release, withdrawn))
    datasets = list(Dataset.objects.filter(pk__in=[d["id"] for d in reach["datasets"]]).select_related("study"))
    for done, dataset in enumerate(datasets, start=1):
        _progress(withdrawal, "datasets", done - 1, len(datasets))
        _remove_dataset(withdrawal, dataset, withdrawn)
    _progress(withdrawal, "notices", 0, len(reach["researchers"]))
    _notify(withdrawal)
    with transaction.atomic():
        locked = Withdrawal.objects.select_for_update(of=("self",), no_key=True).select_related("study").get(
            pk=withdrawal.pk)
        _move(locked, State.DONE, action="research.withdrawal_applied", after=_summary(reach), phase="", done=0,
              total=0, lease_until=None, last_error="", finished_at=timezone.now())
    return withdrawal


def fail(withdrawal: Withdrawal, reason: str) -> None:
    """The job gave up (the task's last retry): the page shows why; a coordinator runs it again."""
    with transaction.atomic():
        locked = Withdrawal.objects.select_for_update(of=("self",), no_key=True).get(pk=withdrawal.pk)
        _move(locked, State.FAILED, action="research.withdrawal_failed", if_allowed=True, last_error=reason[:2000],
              lease_until=None)


def note_retry(withdrawal: Withdrawal, exc: BaseException, countdown: float) -> None:
    """A transient storage error: the lease is given back and the task retries after ``countdown`` seconds."""
    leases.give_back(withdrawal, last_error=leases.retry_note(exc, countdown))


def run_again(actor, withdrawal: Withdrawal) -> None:
    """A coordinator or ethics officer queues a failed job again (each step it finished stays done)."""
    from portal.access.models import Role
    from portal.access.permissions import has_role
    from portal.research.exceptions import AccessRefused, ResearchError

    if not (has_role(actor, withdrawal.study, Role.COORDINATOR) or has_role(actor, withdrawal.study,
                                                                             Role.ETHICS_OFFICER)):
        raise AccessRefused(f"only a coordinator or ethics officer of study {withdrawal.study.code} can run it")
    with transaction.atomic():
        locked = Withdrawal.objects.select_for_update(of=("self",), no_key=True).get(pk=withdrawal.pk)
        if locked.state != State.FAILED:
            raise ResearchError("only a failed withdrawal job can be run again")
        record(actor, "research.withdrawal_run_again", locked, after={"attempts": locked.attempts})
        queue.enqueue("research.apply_withdrawal", locked.pk)


# --- the reach -----------------------------------------------------------------------------------------------


def compute_reach(withdrawal: Withdrawal) -> dict:
    """What the withdrawal reached, as ids and labels (the report the stewards see, and the job's plan)."""
    demonstrator = withdrawal.event.demonstrator
    episodes = list(Episode.objects.filter(recording__demonstrator=demonstrator).select_related(
        "recording__demonstrator"))
    checks = gate.consent_checks([episode.recording for episode in episodes])
    reached = sorted((e for e in episodes if not all(c.passed for c in checks[e.recording_id])),
                     key=lambda e: e.episode_index)
    indexes = [episode.episode_index for episode in reached]
    items = list(ReleaseItem.objects.filter(episode__in=reached).select_related("request"))
    by_release: dict[int, list[int]] = defaultdict(list)
    for item in items:
        by_release[item.request_id].append(item.episode_index)
    requests = {item.request_id: item.request for item in items}
    releases = [{"id": r.pk, "release_id": r.release_id, "state": r.state, "episodes": sorted(by_release[r.pk])}
                for r in sorted(requests.values(), key=lambda r: r.number) if r.state in HOLDING]
    open_requests = sorted(r.pk for r in requests.values() if r.state in ReleaseRequest.OPEN)
    datasets = [{"id": d.pk, "dataset_id": d.dataset_id, "state": d.state}
                for d in Dataset.objects.filter(episodes__item__episode__in=reached).exclude(
                    state=Dataset.State.WITHDRAWN).distinct().order_by("number")]
    links = IssuedLink.objects.select_related("user", "release", "dataset").filter(
        release_id__in=[r["id"] for r in releases], episode_index__in=indexes) | IssuedLink.objects.filter(
        dataset_id__in=[d["id"] for d in datasets]).select_related("user", "release", "dataset")
    files: dict[int, dict] = {}
    for link in links.order_by("pk"):
        entry = files.setdefault(link.user_id, {"user_id": link.user_id, "username": link.user.get_username(),
                                                "files": []})
        where = link.release.release_id if link.release_id else link.dataset.dataset_id
        item = f"{where}/{link.path}"
        if item not in entry["files"]:
            entry["files"].append(item)
    return {"episodes": indexes, "shards": [episode.prefix for episode in reached], "releases": releases,
            "open_requests": open_requests, "datasets": datasets,
            "researchers": sorted(files.values(), key=lambda r: r["username"])}


def episodes_taken(study_id: int, withdrawal_id, release_pk: int) -> list[int] | None:
    """The episode indexes the withdrawal ``withdrawal_id`` of the study took out of the release ``release_pk``,
    as its reach records them; None when the study has no such withdrawal or it did not reach that release. What
    a release carrying approvals is checked against at signing (``releases.services.manifest``)."""
    withdrawal = Withdrawal.objects.filter(pk=withdrawal_id, study_id=study_id).first()
    reached = [] if withdrawal is None else [r.get("episodes") for r in (withdrawal.reach or {}).get("releases", [])
                                             if r.get("id") == release_pk]
    return list(reached[0] or []) if reached else None


def _summary(reach: dict) -> dict:
    return {"episodes": reach["episodes"], "releases": [r["release_id"] for r in reach["releases"]],
            "datasets": [d["dataset_id"] for d in reach["datasets"]], "open_requests": len(reach["open_requests"]),
            "researchers": len(reach["researchers"])}


def _open_reason(release: ReleaseRequest, withdrawn: set[int]) -> str:
    folders = ", ".join(item.folder for item in release.items.filter(episode_index__in=withdrawn))
    return f"consent withdrawn for {folders}; ask again without it"


# --- releases and datasets ---------------------------------------------------------------------------------


def _withdraw_from_release(withdrawal: Withdrawal, release: ReleaseRequest, withdrawn: set[int]) -> None:
    """Remove the episodes' objects from the release's folder; supersede it if it was published; tombstone."""
    releases = storage.releases()
    held = sorted(withdrawn & set(release.items.values_list("episode_index", flat=True)))
    for index in held:
        storage.delete_prefix(releases, f"{release.prefix}{episode_folder(index)}/")
        # Under the redact face policy, the derived shard the release was made from goes too.
        storage.delete_prefix(storage.shards(), f"{redacted.PREFIX}{release.uid}/{episode_folder(index)}/")
    if Tombstone.objects.filter(withdrawal=withdrawal, release=release).exists():
        return
    successor = ReleaseRequest.objects.filter(supersedes=release).first()
    if release.state == ReleaseState.RELEASED:
        successor = supersede(release, set(held), reason=f"{REASON}: {', '.join(map(str, held))} removed",
                              withdrawal=withdrawal.pk)
    _tombstone(withdrawal, held, release=release, successor=successor)


def _remove_dataset(withdrawal: Withdrawal, dataset: Dataset, withdrawn: set[int]) -> None:
    """A one-dataset download holds every episode in each of its files: it is removed whole (its tombstone
    stays)."""
    releases = storage.releases()
    for name in storage.walk(releases, dataset.prefix):
        if not name.startswith(f"{dataset.prefix}tombstones/"):
            releases.delete(name)
    with transaction.atomic():
        locked = Dataset.objects.select_for_update(of=("self",), no_key=True).select_related("study").get(pk=dataset.pk)
        if locked.state != Dataset.State.WITHDRAWN:
            transition(None, locked, Dataset.State.WITHDRAWN, action="research.dataset_withdrawn", lease_until=None)
    if not Tombstone.objects.filter(withdrawal=withdrawal, dataset=dataset).exists():
        indexes = sorted(withdrawn & set(DatasetEpisode.objects.filter(dataset=dataset).values_list(
            "item__episode_index", flat=True)))
        _tombstone(withdrawal, indexes, dataset=dataset)


def _tombstone(withdrawal: Withdrawal, indexes: list[int], *, release: ReleaseRequest | None = None,
               dataset: Dataset | None = None, successor: ReleaseRequest | None = None) -> Tombstone:
    now = timezone.now()
    data = release_format.tombstone_bytes(
        study=withdrawal.study.code, release_id=release.release_id if release else None,
        dataset_id=dataset.dataset_id if dataset else None, episodes_removed=indexes, removed_at=rfc3339(now),
        reason=REASON, superseded_by=successor.release_id if successor else None)
    prefix = release.prefix if release else dataset.prefix
    name = f"{prefix}tombstones/withdrawal-{withdrawal.pk}.json"
    releases = storage.releases()
    existing = Tombstone.objects.filter(withdrawal=withdrawal, release=release, dataset=dataset).first()
    if existing is not None:  # stored before a kill: the same bytes again, never a second version
        data, signature = bytes(existing.content), bytes(existing.signature)
    else:
        signature = release_format.sign(signing.signing_key(), data)
    for content, key in ((data, name), (signature, f"{name}.sig")):
        sha256, size = bytes_digest(content)
        if not storage.matches(releases, key, sha256, size):
            storage.put_checked(releases, key, ContentFile(content), sha256, size)
    with transaction.atomic():
        tombstone, made = Tombstone.objects.get_or_create(
            study=withdrawal.study, withdrawal=withdrawal, release=release, dataset=dataset,
            defaults={"superseded_by": successor, "episode_indexes": indexes, "removed_at": now, "object_name": name,
                      "content": data, "signature": signature})
        if made:
            record(None, "research.tombstone_left", tombstone, after={
                "release": release.release_id if release else None, "dataset": dataset.dataset_id if dataset else None,
                "episodes_removed": indexes, "superseded_by": successor.release_id if successor else None,
                "object": name})
    return tombstone


# --- telling the researchers ------------------------------------------------------------------------------


def _notify(withdrawal: Withdrawal) -> None:
    """One message per affected researcher, listing the files to delete: in their inbox always, by email when
    they have an address (``notifications``: queued after this commits); a notice that was sent is not sent
    again."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.in_bulk([r["user_id"] for r in withdrawal.reach["researchers"]])
    for entry in withdrawal.reach["researchers"]:
        user = users.get(entry["user_id"])
        if user is None:
            continue
        with transaction.atomic():
            notice, _ = WithdrawalNotice.objects.select_for_update(no_key=True).get_or_create(
                study=withdrawal.study, withdrawal=withdrawal, user=user, defaults={"files": entry["files"]})
            if notice.sent_at is not None:
                continue
            told = notices.withdrawal_reached(withdrawal, user, notice.files, subject=_subject(withdrawal),
                                             body=_body(withdrawal, notice.files))
            notice.sent_at = timezone.now()
            notice.save(update_fields=["sent_at"])
            record(None, "research.withdrawal_notice_sent", notice,
                   after={"files": len(notice.files), "email": told.email if told else "told before"})


def _subject(withdrawal: Withdrawal) -> str:
    return f"[CERES] Delete data of study {withdrawal.study.code}: consent was withdrawn"


def _body(withdrawal: Withdrawal, files: list[str]) -> str:
    """What to delete, and nothing about the person: no designator, no headset, no episode content."""
    superseded = [f"{t.release.release_id} is superseded by {t.superseded_by.release_id}"
                  for t in withdrawal.tombstones.select_related("release", "superseded_by")
                  if t.release_id and t.superseded_by_id]
    lines = [
        f"Consent for some episodes of study {withdrawal.study.code} was withdrawn. Under the study's data-use",
        "agreement, delete every copy of these files you downloaded:",
        "",
        *(f"  {name}" for name in files),
        "",
        "A one-dataset download named above is removed as a whole; build a new one from the released episodes.",
        *([*superseded, "The superseding release holds the other episodes (once approved, if it needs review)."]
          if superseded else []),
    ]
    return "\n".join(lines) + "\n"
