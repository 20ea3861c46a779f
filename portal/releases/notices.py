"""What people are told of a release request's moves, composed once (``notifications.services.notify``): the
release services call it in the transaction of the change. The texts say what the recipient may already see on
the request's page and no more: study, release, the decision and its reason."""

from __future__ import annotations

from django.urls import reverse

from portal.core.roles import Role
from portal.notifications.models import Kind
from portal.notifications.services import holders, notify, others
from portal.releases.models import ReleaseRequest


def release_moved(actor, release) -> None:
    """Called by ``releases.services.release_requests.set_state`` after every move of a release request."""
    State = ReleaseRequest.State
    study = release.study
    name = f"{release.release_id} of study {study.code}"
    link = reverse("release-detail", args=[study.code, release.number])
    stewards = [release.requested_by, *holders(study, Role.COORDINATOR)]
    if release.state == State.AWAITING_APPROVAL:
        officers = [u for u in holders(study, Role.ETHICS_OFFICER) if u.pk != release.requested_by_id]
        notify(others(officers, actor), Kind.RELEASE_AWAITS_APPROVAL, study=study,
               title=f"{name} awaits your approval",
               body=f"{release.episode_count} episode(s), {release.approvals_required or 1} approval(s) needed. "
                    f"Review it in the episode viewer and approve or reject it.", link=link)
    elif release.state == State.APPROVED:
        notify(others(stewards, actor), Kind.RELEASE_APPROVED, study=study, title=f"{name} was approved",
               body="It is being published; you are told again when it is.", link=link)
    elif release.state == State.REJECTED:
        notify(others(stewards, actor), Kind.RELEASE_REJECTED, study=study, title=f"{name} was rejected",
               body=f"Reason: {release.reason}", link=link)
    elif release.state == State.RELEASED:
        notify(others(stewards, actor), Kind.RELEASE_PUBLISHED, study=study, title=f"{name} was published",
               body="Researchers with access to the study can now download it.", link=link)
    elif release.state == State.FAILED:
        notify(others(stewards, actor), Kind.RELEASE_FAILED, study=study, title=f"{name} failed",
               body=f"Reason: {release.reason}\nIts page lets a coordinator try again.", link=link)
