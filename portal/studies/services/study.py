"""Studies: creation, status, raw-audio policy, the data-use agreement. How many approvals a release needs is
the ethics officers' decision: ``approval_policy``."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django_scopes import scope as study_scope
from django_scopes import scopes_disabled

from exporter.cards import DEFAULT_LICENCE, LICENCES
from exporter.receipt import bytes_digest
from portal.audit.services import record
from portal.core.fixed_query import FixedQuery
from portal.studies.exceptions import RegistryError, StudyError
from portal.studies.models import ConsentDocument, ConsentEvent, DataUseAgreement, Demonstrator, Headset, Study
from portal.studies.services.registry_change import signed_in_user


def _snapshot(study: Study) -> dict:
    return {
        "code": study.code,
        "title": study.title,
        "status": study.status,
        "project_id": study.project_id,
        "audio_policy": study.audio_policy,
        "audio_retain_days": study.audio_retain_days,
        "approvals_required": study.approvals_required,
        "face_policy": study.face_policy,
        "approval_second_factor": study.approval_second_factor,
        "carry_over_approvals": study.carry_over_approvals,
    }


@transaction.atomic
def create_study(actor, *, code: str, title: str, project_id: str = "", status: str = Study.Status.DRAFT,
                 audio_policy: str = Study.AudioPolicy.DISCARD, audio_retain_days: int | None = None,
                 approvals_required: int = 2, face_policy: str = Study.FacePolicy.REDACT) -> Study:
    study = Study(code=code, title=title, project_id=project_id, status=status, audio_policy=audio_policy,
                  audio_retain_days=audio_retain_days, approvals_required=approvals_required,
                  face_policy=face_policy)
    taken = StudyError(f"a study with the code {code!r} already exists")
    if Study.objects.filter(code=code).exists():
        raise taken
    study.full_clean(validate_unique=False)
    try:
        with transaction.atomic():  # a concurrent creation of the same code loses here, like a sequential one
            study.save()
    except IntegrityError:
        raise taken from None
    record(actor, "study.created", study, after=_snapshot(study))
    return study


# draft -> active -> closed; a closed study may be reopened, but never goes back to draft.
_STATUS_MOVES = {
    Study.Status.DRAFT: {Study.Status.ACTIVE, Study.Status.CLOSED},
    Study.Status.ACTIVE: {Study.Status.CLOSED},
    Study.Status.CLOSED: {Study.Status.ACTIVE},
}


def _locked(study: Study) -> Study:
    return Study.objects.select_for_update(no_key=True).get(pk=study.pk)


@transaction.atomic
def set_study_status(actor, study: Study, status: str) -> Study:
    locked = _locked(study)
    if status not in Study.Status.values:
        raise RegistryError(f"unknown study status {status!r}; expected one of {', '.join(Study.Status.values)}")
    if status not in _STATUS_MOVES[locked.status]:
        raise RegistryError(f"study {locked.code} cannot go from {locked.status} to {status}")
    before = _snapshot(locked)
    locked.status = status
    locked.save(update_fields=["status"])
    record(actor, "study.status_changed", locked, before=before, after=_snapshot(locked))
    study.status = locked.status
    return locked


@transaction.atomic
def set_audio_policy(actor, study: Study, policy: str, *, retain_days: int | None = None) -> Study:
    """Set the raw-audio retention policy; ``retain_days`` is required for (and only for) ``retain-days``."""
    locked = _locked(study)
    if policy not in Study.AudioPolicy.values:
        raise RegistryError(f"unknown audio policy {policy!r}; expected one of "
                            f"{', '.join(Study.AudioPolicy.values)}")
    if policy == Study.AudioPolicy.RETAIN_DAYS:
        if retain_days is None or retain_days < 1:
            raise RegistryError("the retain-days policy needs a number of days of at least 1")
    elif retain_days is not None:
        raise RegistryError(f"a number of days applies only to the retain-days policy, not to {policy}")
    before = _snapshot(locked)
    locked.audio_policy, locked.audio_retain_days = policy, retain_days
    locked.save(update_fields=["audio_policy", "audio_retain_days"])
    record(actor, "study.audio_policy_changed", locked, before=before, after=_snapshot(locked))
    study.audio_policy, study.audio_retain_days = policy, retain_days
    return locked


@transaction.atomic
def set_approval_second_factor(actor, study: Study, required: bool) -> Study:
    """Whether approving a release of this study needs a fresh second factor (``CERES_REQUIRE_2FA`` asks it of
    every study)."""
    locked = _locked(study)
    before = _snapshot(locked)
    locked.approval_second_factor = bool(required)
    locked.save(update_fields=["approval_second_factor"])
    record(actor, "study.approval_second_factor_changed", locked, before=before, after=_snapshot(locked))
    study.approval_second_factor = locked.approval_second_factor
    return locked


@transaction.atomic
def set_carry_over_approvals(actor, study: Study, carry: bool) -> Study:
    """Whether a release superseded after a consent withdrawal keeps its approvals (else it goes back to review)."""
    locked = _locked(study)
    before = _snapshot(locked)
    locked.carry_over_approvals = bool(carry)
    locked.save(update_fields=["carry_over_approvals"])
    record(actor, "study.carry_over_approvals_changed", locked, before=before, after=_snapshot(locked))
    study.carry_over_approvals = locked.carry_over_approvals
    return locked


def current_data_use_agreement(study: Study) -> DataUseAgreement | None:
    with study_scope(study=study):
        return DataUseAgreement.objects.order_by("-version").first()


def _counted(rows: QuerySet) -> Coalesce:
    """How many of ``rows`` (distinct) belong to the outer query's study, as a column."""
    return Coalesce(Subquery(rows.filter(study_id=OuterRef("pk")).order_by().values("study_id")
                             .annotate(counted=Count("pk", distinct=True)).values("counted")), 0)


def _registry_counts_query(study_id: int) -> QuerySet:
    with scopes_disabled():  # each count names the study itself (``_counted``)
        columns = {
            "headsets": _counted(Headset.objects.filter(retired_on__isnull=True)),
            "retired_headsets": _counted(Headset.objects.filter(retired_on__isnull=False)),
            "demonstrators": _counted(Demonstrator.objects.all()),
            "withdrawn": _counted(Demonstrator.objects.filter(consent_events__kind=ConsentEvent.Kind.WITHDRAWN)),
            "documents": _counted(ConsentDocument.objects.all()),
            "pending_documents": _counted(ConsentDocument.objects.filter(accepted_at__isnull=True)),
        }
        # Named apart from the study's relations (its ``headsets``, ``demonstrators``).
        columns = {f"counted_{name}": column for name, column in columns.items()}
        return Study.objects.filter(pk=study_id).annotate(**columns).values_list(*columns)


# The study overview's counts, on every visit: one query whose shape never changes, compiled once per process and
# run with the study (``core.fixed_query``); the counts are read anew every time.
_REGISTRY_COUNTS = FixedQuery(_registry_counts_query, study_id=(1, 2))


def registry_counts(study: Study) -> dict[str, int]:
    """The study's registry counted, for its overview: active and retired headsets, demonstrators, demonstrators
    who withdrew, consent documents, documents awaiting acceptance."""
    (row,) = _REGISTRY_COUNTS.rows(study_id=study.pk)
    return {name.removeprefix("counted_"): count for name, count in zip(_REGISTRY_COUNTS.columns(), row, strict=True)}


@transaction.atomic
def publish_data_use_agreement(actor, study: Study, *, text: str, licence: str | None = None) -> DataUseAgreement:
    """Publish a new version of the study's data-use agreement (the highest version is current). ``licence``: an
    SPDX identifier of ``LICENCES`` or ``other`` (the agreement is the only licence); by default the current
    version's, or ``other``. A new version changes the text, the licence or both."""
    text = text.strip()
    if not text:
        raise RegistryError("the data-use agreement text is empty")
    _locked(study)  # serialises version numbers
    with study_scope(study=study):
        current = DataUseAgreement.objects.order_by("-version").first()
        licence = licence or (current.licence if current else DEFAULT_LICENCE)
        if licence not in LICENCES:
            raise RegistryError(f"licence {licence!r} is not one of {', '.join(LICENCES)}")
        sha256, _ = bytes_digest(text.encode("utf-8"))
        if current is not None and current.sha256 == sha256 and current.licence == licence:
            raise RegistryError(f"the text and licence are identical to the current data-use agreement "
                                f"v{current.version}")
        agreement = DataUseAgreement.objects.create(
            study=study, version=(current.version + 1) if current else 1, text=text, sha256=sha256,
            licence=licence, created_by=signed_in_user(actor),
        )
        record(actor, "study.data_use_agreement_published", agreement,
               before={"version": current.version, "sha256": current.sha256, "licence": current.licence}
               if current else None,
               after={"version": agreement.version, "sha256": sha256, "licence": licence})
    return agreement
