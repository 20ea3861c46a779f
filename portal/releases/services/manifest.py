"""The release manifest of a request, built through the exporter's one definition of the format, signed with the
portal's signing key (``portal.core.signing``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exporter import release as release_format
from exporter.layout import episode_folder
from exporter.timestamps import rfc3339
from portal.audit.models import AuditEvent
from portal.audit.services import chain_head
from portal.core.signing import signing_key
from portal.releases.models import Approval, ReleaseItem, ReleaseRequest

State = ReleaseRequest.State
# ``(study_id, withdrawal_id, release_pk) -> episode indexes | None``: the episodes a withdrawal of the study took
# out of a release, as the withdrawal's own reach records them (None: no such withdrawal, or it did not reach that
# release). Withdrawals are research's, which builds on releases: it gives its reader here when it loads.
_episodes_taken: Callable[[int, Any, int], list[int] | None] | None = None


def read_withdrawals_with(episodes_taken: Callable[[int, Any, int], list[int] | None]) -> None:
    """Let ``carried_mismatches`` read a withdrawal's reach through ``episodes_taken`` (research's)."""
    global _episodes_taken
    _episodes_taken = episodes_taken


def section(release: ReleaseRequest, items: list[ReleaseItem] | None = None) -> dict[str, Any]:
    """What ethics officers are shown and approve: the request's frozen episodes and every file. Built only from
    what the request froze when it was made (the study's code, the requester's name, each episode's capture id,
    receipt and files), never from rows a rename or an edit may change since."""
    items = items if items is not None else list(release.items.all())
    return release_format.release_section(
        study=release.study_code, release_id=release.release_id, purpose=release.purpose,
        requested_by=release.requested_by_name, requested_at=rfc3339(release.created_at),
        episodes=[{"episode_index": item.episode_index, "episode_id": item.capture_id,
                   "receipt_sha256": item.receipt_sha256, "files": item.files} for item in items],
        face_policy=release.face_policy or None, **_superseding(release))


def _superseding(release: ReleaseRequest) -> dict[str, Any]:
    """What a release made by a withdrawal names: the release it supersedes (by number and manifest digest), the
    withdrawal and the approvals it carries; a superseding release made before they were kept names only the
    release (its manifest keeps the bytes it was approved with)."""
    if not release.supersedes_id:
        return {}
    named = release.superseding or {}
    if not named:
        return {"supersedes": release.supersedes.release_id}
    return {"supersedes": {key: named[key] for key in ("release_id", "number", "manifest_sha256")},
            "withdrawal": named["withdrawal"], "carried_approvals": named.get("carried_approvals") or None}


def section_digest(release: ReleaseRequest, items: list[ReleaseItem] | None = None) -> str:
    return release_format.section_digest(section(release, items))


def _recorded(release: ReleaseRequest) -> dict[str, list[dict[str, Any]]]:
    """What the audit log recorded when the request was made, submitted and approved (each event's ``after``)."""
    recorded: dict[str, list[dict[str, Any]]] = {action: [] for action in RECORDED}
    for action, after in AuditEvent.objects.filter(
            target_type=f"{ReleaseRequest._meta.app_label}.{ReleaseRequest._meta.model_name}",
            target_id=str(release.pk), action__in=RECORDED).order_by("seq").values_list("action", "after"):
        recorded[action].append(after or {})
    return recorded


RECORDED = ("release.requested", "release.submitted", "release.approval_given", "release.approval_carried_over")


def carries_approvals(release: ReleaseRequest) -> bool:
    """A release made by a withdrawal that carries the superseded release's approvals instead of new ones."""
    return bool(release.supersedes_id and (release.superseding or {}).get("carried_approvals"))


def approval_mismatches(release: ReleaseRequest) -> list[str]:
    """Why what would be signed now is not what was approved (empty when it is).

    The section rebuilt from the request's rows must have the digest the request was made with, that every
    approval names, and that the audit log recorded when the request was made; each approval must be one the
    audit log recorded (the officer's name, the digest and the time); and there must be as many as the request
    needed when it was submitted (the larger of its row and the audit log's record of it). A row changed, added
    or removed after the approval by someone who can write to the database stops the release. A release that
    carries a superseded release's approvals is checked for what it is instead (``carried_mismatches``)."""
    if carries_approvals(release):
        return carried_mismatches(release)
    current = section_digest(release)
    problems = []
    if current != release.manifest_sha256:
        problems.append(f"the manifest section's digest is {current}, not the approved {release.manifest_sha256}")
    recorded = _recorded(release)
    made = [after.get("manifest_sha256") for after in recorded["release.requested"]]
    if made and current not in made:
        problems.append(f"the manifest section's digest is {current}, not the {made[-1]} the audit log recorded "
                        f"when the request was made")
    given = recorded["release.approval_given"] + recorded["release.approval_carried_over"]
    approvals = list(Approval.objects.filter(request=release).order_by("approved_at", "pk"))
    for approval in approvals:
        if approval.manifest_sha256 != current:
            problems.append(f"the approval of {approval.officer_name!r} names {approval.manifest_sha256}, "
                            f"not {current}")
        approved_at = rfc3339(approval.approved_at)
        if not any(after.get("officer") == approval.officer_name
                   and after.get("manifest_sha256") == approval.manifest_sha256
                   and after.get("approved_at", approved_at) == approved_at for after in given):
            problems.append(f"the approval of {approval.officer_name!r} at {approved_at} is not one the audit log "
                            f"recorded")
    frozen = [after["approvals_required"] for after in recorded["release.requested"] + recorded["release.submitted"]
              if after.get("approvals_required")]
    needed = max([release.approvals_required or 0, *frozen])
    officers = len({approval.officer_id for approval in approvals})
    if not needed or officers < needed:
        problems.append(f"{officers} ethics officer(s) approved; the request needs {needed or 'an unknown number'}")
    return problems


def _approval_entry(approval: Approval) -> dict[str, Any]:
    return {"officer": approval.officer_name, "approved_at": rfc3339(approval.approved_at),
            "manifest_sha256": approval.manifest_sha256}


def _item_entry(item: ReleaseItem) -> tuple:
    return (item.episode_index, item.capture_id, item.receipt_sha256,
            sorted((f["path"], f["bytes"], f["sha256"]) for f in item.files))


def carried_mismatches(release: ReleaseRequest) -> list[str]:
    """Why a release made by a withdrawal may not be signed with the approvals it carries (empty when it may).

    Its section, rebuilt from its rows, must have the digest it was made with (and the audit log recorded); it
    must name the release it supersedes by the number and manifest digest that release has, a withdrawal of the
    study whose reach took exactly the missing episodes out of that release, and that release's approvals (each
    officer, time and the digest they approved, which is that release's); its own approvals must be exactly
    those, each carrying one and recorded in the audit log; and its episodes must be a strict subset of the
    superseded release's, each with the same capture, receipt and files."""
    problems = []
    current = section_digest(release)
    if current != release.manifest_sha256:
        problems.append(f"the manifest section's digest is {current}, not the {release.manifest_sha256} it was "
                        f"made with")
    recorded = _recorded(release)
    made = [after.get("manifest_sha256") for after in recorded["release.requested"]]
    if current not in made:
        problems.append(f"the manifest section's digest is {current}, not one the audit log recorded when the "
                        f"request was made")
    named = release.superseding
    old = ReleaseRequest.objects.get(pk=release.supersedes_id)
    if old.state != State.SUPERSEDED:
        problems.append(f"{old.release_id} is {old.state}, not superseded")
    if (named.get("release_id"), named.get("number"), named.get("manifest_sha256")) != (
            old.release_id, old.number, old.manifest_sha256):
        problems.append(f"the section names {named.get('release_id')} with manifest {named.get('manifest_sha256')}, "
                        f"not {old.release_id} with {old.manifest_sha256}")
    kept = {item.episode_index: _item_entry(item) for item in release.items.all()}
    approved = {item.episode_index: _item_entry(item) for item in old.items.all()}
    for index, entry in sorted(kept.items()):
        if approved.get(index) != entry:
            problems.append(f"{episode_folder(index)} is not the episode {old.release_id} was approved with")
    removed = sorted(approved.keys() - kept.keys())
    if not removed:
        problems.append(f"it removes no episode from {old.release_id}: not a strict subset of what was approved")
    taken = _episodes_taken(release.study_id, named.get("withdrawal"), old.pk) if _episodes_taken else None
    if taken is None or not set(removed) <= set(taken):
        problems.append(f"withdrawal {named.get('withdrawal')} of the study did not take "
                        f"{', '.join(map(episode_folder, removed)) or 'any episode'} out of {old.release_id}")
    carried = sorted(named.get("carried_approvals") or [], key=lambda a: (a["approved_at"], a["officer"]))
    originals = sorted((_approval_entry(a) for a in Approval.objects.filter(request=old)),
                       key=lambda a: (a["approved_at"], a["officer"]))
    if carried != originals:
        problems.append(f"the approvals it names as carried are not those of {old.release_id}")
    if any(a["manifest_sha256"] != old.manifest_sha256 for a in originals):
        problems.append(f"an approval of {old.release_id} names another manifest than its {old.manifest_sha256}")
    approvals = list(Approval.objects.filter(request=release).select_related("carried_over_from"))
    given = recorded["release.approval_carried_over"]
    for approval in approvals:
        source = approval.carried_over_from
        if source is None or source.request_id != old.pk or _approval_entry(approval) != _approval_entry(source):
            problems.append(f"the approval of {approval.officer_name!r} is not one it carries from {old.release_id}")
        elif not any(after.get("officer") == approval.officer_name and after.get("from") == old.release_id
                     and after.get("manifest_sha256") == approval.manifest_sha256 for after in given):
            problems.append(f"the approval of {approval.officer_name!r} carried from {old.release_id} is not one "
                            f"the audit log recorded")
    if sorted(map(_approval_entry, approvals), key=lambda a: (a["approved_at"], a["officer"])) != carried:
        problems.append("its approvals are not exactly the approvals its section names as carried")
    needed = max(release.approvals_required or 0, old.approvals_required or 0)
    officers = len({approval.officer_id for approval in approvals})
    if not needed or officers < needed:
        problems.append(f"{officers} ethics officer(s) approval(s) carried; it needs {needed or 'an unknown number'}")
    return problems


def signed_manifest(release: ReleaseRequest, *, released_at, card_files: dict[str, bytes] | None = None,
                    redacted_episodes: list[dict[str, Any]] | None = None) -> tuple[bytes, bytes]:
    """The manifest's exact bytes and their Ed25519 signature; ``card_files``: the dataset card and metadata
    files at the release's root, listed outside the approved section; ``redacted_episodes``: the derived shards
    published instead of the approved ones under the redact face policy (``redacted.manifest_entry``), also
    outside it."""
    approvals = [{**_approval_entry(approval), **({"carried_over_from": approval.carried_over_from.request.release_id}
                                                   if carries_approvals(release) else {})}
                 for approval in Approval.objects.filter(request=release).select_related(
                     "carried_over_from__request")]
    data = release_format.manifest_bytes(release=section(release), approvals=approvals,
                                         released_at=rfc3339(released_at), audit_chain_head=chain_head(),
                                         card_files=None if card_files is None
                                         else release_format.card_entries(card_files),
                                         redacted_episodes=release_format.redacted_entries(redacted_episodes or []))
    return data, release_format.sign(signing_key(), data)
