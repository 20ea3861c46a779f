"""The study's face policy (``off``, ``detect``, ``redact``): what happens to bystanders' faces in its video. An
ethics officer's decision, audited like the other study settings; a release request keeps the policy in force when
it was requested (``ReleaseRequest.face_policy``)."""

from __future__ import annotations

from django.db import transaction

from portal.access.models import Role
from portal.access.permissions import has_role
from portal.audit.services import record
from portal.studies.exceptions import RegistryError, StudyError
from portal.studies.models import Study
from portal.studies.services.study import _locked, _snapshot


class FacePolicyRefused(StudyError):
    """Only the study's ethics officers change its face policy."""

    status = 403


@transaction.atomic
def set_face_policy(actor, study: Study, policy: str) -> Study:
    if not getattr(actor, "is_authenticated", False) or not has_role(actor, study, Role.ETHICS_OFFICER):
        raise FacePolicyRefused(f"only an ethics officer of study {study.code} can change its face policy")
    if policy not in Study.FacePolicy.values:
        raise RegistryError(f"unknown face policy {policy!r}; expected one of {', '.join(Study.FacePolicy.values)}")
    locked = _locked(study)
    before = _snapshot(locked)
    locked.face_policy = policy
    locked.save(update_fields=["face_policy"])
    record(actor, "study.face_policy_changed", locked, before=before,
           after={**_snapshot(locked), "changed_by": actor.get_username()})
    study.face_policy = policy
    return locked
