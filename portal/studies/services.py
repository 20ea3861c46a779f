"""Study services: the only place where studies change state."""

from __future__ import annotations

from django.db import transaction

from portal.audit.services import record
from portal.studies.models import Study


class StudyError(Exception):
    """A study change breaks a rule; the message says which."""


def _snapshot(study: Study) -> dict:
    return {
        "code": study.code,
        "title": study.title,
        "status": study.status,
        "project_id": study.project_id,
        "audio_policy": study.audio_policy,
        "audio_retain_days": study.audio_retain_days,
        "approvals_required": study.approvals_required,
    }


@transaction.atomic
def create_study(actor, *, code: str, title: str, project_id: str = "", status: str = Study.Status.DRAFT,
                 audio_policy: str = Study.AudioPolicy.DISCARD, audio_retain_days: int | None = None,
                 approvals_required: int = 2) -> Study:
    study = Study(code=code, title=title, project_id=project_id, status=status, audio_policy=audio_policy,
                  audio_retain_days=audio_retain_days, approvals_required=approvals_required)
    study.full_clean()
    study.save()
    record(actor, "study.created", study, after=_snapshot(study))
    return study
