"""Release requests: a coordinator freezes a list of verified episodes with a purpose (a draft), submits it
for approval; a request ends rejected (with a reason) or released. Also the one place a request changes
state (``set_state``): ``core.states.transition`` with the request's audit snapshot, then its notification."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from exporter.receipt import RECEIPT
from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.core import queue, storage
from portal.core.states import lock_fresh, transition
from portal.recordings.models import Episode, Recording
from portal.releases import notices
from portal.releases.exceptions import ReleaseError, StorageUnavailable
from portal.releases.models import EpisodeTag, ReleaseItem, ReleaseRequest
from portal.releases.services import manifest
from portal.releases.services.gate import require_passing
from portal.studies.models import Study

State = ReleaseRequest.State
PURPOSE_MAX_CHARS = 2000
MAX_EPISODES = 1000


def snapshot(release: ReleaseRequest) -> dict[str, Any]:
    return {"state": release.state, "reason": release.reason, "manifest_sha256": release.manifest_sha256}


def set_state(actor, release: ReleaseRequest, state: str, *, action: str, after: dict | None = None,
              if_allowed: bool = False, **fields) -> bool:
    """Move ``release`` to ``state`` (``IllegalTransition`` if the table forbids it, or False with
    ``if_allowed``) with ``fields``, audited, in the caller's transaction (``core.states.transition``)."""
    if not transition(actor, release, state, action=action, snapshot=snapshot, after=after, if_allowed=if_allowed,
                      **fields):
        return False
    notices.release_moved(actor, release)
    return True


def releasable_episodes() -> QuerySet[Episode]:
    """Episodes of the study in scope that may be put into a release: their shard verified against its receipt."""
    return Episode.objects.filter(receipt_status=Episode.Receipt.VERIFIED, recording__state=Recording.State.VERIFIED)


def episode_tags(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The (kind, value) tags of an episode from its recording's summary: tasks and outcomes of its segments."""
    return ([(EpisodeTag.Kind.TASK, task[:500]) for task in summary.get("tasks", [])]
            + [(EpisodeTag.Kind.OUTCOME, outcome[:500]) for outcome in summary.get("outcomes", [])])


def tag_episode(episode: Episode) -> None:
    EpisodeTag.objects.bulk_create(
        [EpisodeTag(study_id=episode.study_id, episode=episode, kind=kind, value=value)
         for kind, value in episode_tags(episode.recording.summary)], ignore_conflicts=True)


def _require(actor, study: Study, role: str, what: str) -> None:
    if not has_role(actor, study, role):
        raise ReleaseError(f"only a {Role(role).label.lower()} of study {study.code} can {what}")


def _frozen_files(episode: Episode) -> list[dict[str, Any]]:
    """The shard's files as its receipt lists them, and the stored receipt itself (read from storage: its
    digest must be the one recorded at export)."""
    sha256, size = storage.digest(storage.shards(), episode.prefix + RECEIPT)
    if sha256 != episode.receipt_sha256:
        raise ReleaseError(f"{episode.folder}: the stored receipt no longer matches the one recorded at export")
    files = [{"path": item["path"], "bytes": item["bytes"], "sha256": item["sha256"]} for item in episode.shard_files]
    return [*files, {"path": RECEIPT, "bytes": size, "sha256": sha256}]


def create_request(actor, study: Study, *, episodes: Iterable[Episode], purpose: str) -> ReleaseRequest:
    """A coordinator asks for a release of verified episodes: a draft with the episodes, their receipt digests
    and every file frozen. The stored shards are then inspected for the gate (a task)."""
    _require(actor, study, Role.COORDINATOR, "ask for a release")
    purpose = (purpose or "").strip()
    if not purpose:
        raise ReleaseError("a release request needs a purpose: say what the episodes are released for")
    if len(purpose) > PURPOSE_MAX_CHARS:
        raise ReleaseError(f"the purpose is longer than {PURPOSE_MAX_CHARS} characters")
    chosen = {episode.pk: episode for episode in episodes}
    if not chosen:
        raise ReleaseError("choose at least one episode to release")
    if len(chosen) > MAX_EPISODES:
        raise ReleaseError(f"a release holds at most {MAX_EPISODES} episodes; split it into several requests")
    found = {episode.pk: episode for episode in releasable_episodes().filter(pk__in=chosen)
             .select_related("recording")}
    refused = sorted(episode.folder for pk, episode in chosen.items() if pk not in found)
    if refused:
        raise ReleaseError(f"only episodes whose shard is verified can be released; not {', '.join(refused)}")
    try:
        frozen = {pk: _frozen_files(episode) for pk, episode in found.items()}
    except Exception as exc:
        if not storage.is_transient(exc):
            raise
        raise StorageUnavailable(f"the shards storage did not answer ({exc}); nothing was made, try again") from exc
    with transaction.atomic():
        Study.objects.select_for_update(no_key=True).filter(pk=study.pk).first()  # serialises the numbers
        number = (ReleaseRequest.objects.aggregate(last=Max("number"))["last"] or 0) + 1
        release = ReleaseRequest(study=study, number=number, purpose=purpose, requested_by=actor,
                                 study_code=study.code, requested_by_name=actor.get_username(),
                                 face_policy=Study.objects.only("face_policy").get(pk=study.pk).face_policy,
                                 episode_count=len(found))
        release.manifest_sha256 = ""
        release.save()
        items = ReleaseItem.objects.bulk_create([
            ReleaseItem(study=study, request=release, episode=episode, episode_index=episode.episode_index,
                        capture_id=episode.recording.capture_id, receipt_sha256=episode.receipt_sha256,
                        files=frozen[pk])
            for pk, episode in sorted(found.items(), key=lambda pair: pair[1].episode_index)])
        release.manifest_sha256 = manifest.section_digest(release, items)
        release.save(update_fields=["manifest_sha256"])
        record(actor, "release.requested", release, after={
            **snapshot(release), "purpose": purpose, "face_policy": release.face_policy,
            "episodes": [item.folder for item in items],
            "receipts": {item.folder: item.receipt_sha256 for item in items}})
        queue.enqueue("releases.inspect_request", release.pk)
    return release


def submit(actor, release: ReleaseRequest) -> ReleaseRequest:
    """A coordinator sends a draft to the ethics officers; refused while the gate fails for any episode. The
    number of approvals it needs is the study's at this moment, frozen on the request: the officers decide under
    it, and a later change of the study's policy (by anyone) does not move it."""
    _require(actor, release.study, Role.COORDINATOR, "submit a release request")
    with transaction.atomic():
        lock_fresh(release)
        required = Study.objects.only("approvals_required").get(pk=release.study_id).approvals_required
        if release.state != State.DRAFT:
            raise ReleaseError(f"{release.release_id} is {release.get_state_display().lower()}, not a draft")
        require_passing(release, "submitted")
        set_state(actor, release, State.AWAITING_APPROVAL, action="release.submitted", submitted_at=timezone.now(),
                  approvals_required=required, after={"approvals_required": required})
    return release


def reject(actor, release: ReleaseRequest, *, reason: str) -> ReleaseRequest:
    """End a draft or a request awaiting approval, with a reason: an ethics officer of the study rejects it, or
    its requester withdraws it."""
    reason = (reason or "").strip()
    if not reason:
        raise ReleaseError("a rejection needs a reason")
    study = release.study
    is_requester = getattr(actor, "pk", None) == release.requested_by_id
    if not is_requester and not has_role(actor, study, Role.ETHICS_OFFICER):
        raise ReleaseError(f"only an ethics officer of study {study.code}, or its requester, can reject "
                           f"{release.release_id}")
    with transaction.atomic():
        lock_fresh(release)
        if release.state not in ReleaseRequest.OPEN:
            raise ReleaseError(f"{release.release_id} is {release.get_state_display().lower()}; only a draft or "
                               f"a request awaiting approval can be rejected")
        set_state(actor, release, State.REJECTED, action="release.rejected", reason=reason, rejected_by=actor,
                  decided_at=timezone.now(), after={"withdrawn_by_requester": is_requester})
    return release


def reverify(actor, release: ReleaseRequest) -> int:
    """Re-verify the request's shards against their receipts now (the gate's freshness), in the worker; shards
    whose reading for the gate is still pending, or failed, are read again too."""
    study = release.study
    if not (has_role(actor, study, Role.COORDINATOR) or has_role(actor, study, Role.ETHICS_OFFICER)):
        raise ReleaseError(f"only a coordinator or ethics officer of study {study.code} can re-verify receipts")
    episodes = list(release.items.values_list("episode_id", flat=True))
    with transaction.atomic():
        unread = release.items.exclude(inspection_error="").update(inspected_at=None, inspection_error="")
        record(actor, "release.reverification_requested", release, after={"episodes": len(episodes),
                                                                           "read_again": unread})
        for pk in episodes:
            queue.enqueue("recordings.verify_episode", pk)
        if release.items.filter(inspected_at__isnull=True).exists():
            queue.enqueue("releases.inspect_request", release.pk)
    return len(episodes)
