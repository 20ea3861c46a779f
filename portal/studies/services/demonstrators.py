"""Demonstrators, known only by a designator: typed (validated) or generated, and the look-up ingest makes."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django_scopes import scope as study_scope

from exporter.designator import family_pair, generate_designator, validate_designator
from portal.audit.services import record
from portal.studies.exceptions import RegistryError
from portal.studies.models import Demonstrator, Headset, Study
from portal.studies.services.registry_change import check_open_for_registry, signed_in_user


def normalise_designator(text: str) -> str:
    return text.strip().lower()


def _demonstrator_snapshot(demonstrator: Demonstrator) -> dict:
    return {"designator": demonstrator.designator,
            "headset": demonstrator.headset.headset_id if demonstrator.headset else None}


def _check_headset(study: Study, headset: Headset | None) -> None:
    if headset is not None and headset.study_id != study.pk:
        raise RegistryError(f"headset {headset.headset_id!r} belongs to another study")


@transaction.atomic
def create_demonstrator(actor, study: Study, *, designator: str = "", headset: Headset | None = None
                        ) -> Demonstrator:
    """Register a demonstrator; a blank designator is generated (family pair from ``headset`` when given).

    A typed designator is validated like a generated one and, with a headset, must carry that
    headset's family pair.
    """
    check_open_for_registry(study)
    _check_headset(study, headset)
    typed = normalise_designator(designator)
    with study_scope(study=study):
        if typed:
            try:
                validate_designator(typed)
            except ValueError as exc:
                raise RegistryError(str(exc)) from None
            if headset is not None:
                expected = "-".join(family_pair(headset.headset_id))
                if not typed.startswith(expected + "-"):
                    raise RegistryError(f"designator {typed!r} does not start with the family pair {expected!r} "
                                        f"of headset {headset.headset_id!r}")
            taken = RegistryError(f"designator {typed!r} is already used in study {study.code}")
            if Demonstrator.objects.filter(designator=typed).exists():
                raise taken
            try:
                with transaction.atomic():  # a concurrent registration of the same designator loses here
                    demonstrator = Demonstrator.objects.create(study=study, designator=typed, headset=headset,
                                                               created_by=signed_in_user(actor, required=False))
            except IntegrityError:
                raise taken from None
        else:
            demonstrator = _create_generated(actor, study, headset)
        record(actor, "demonstrator.created", demonstrator, after=_demonstrator_snapshot(demonstrator))
    return demonstrator


def _create_generated(actor, study: Study, headset: Headset | None) -> Demonstrator:
    def is_taken(candidate: str) -> bool:
        return Demonstrator.objects.filter(designator=candidate).exists()

    # A concurrent writer can take the same designator between the check and the insert: draw again.
    for _ in range(5):
        try:
            designator = generate_designator(headset.headset_id if headset else None, is_taken)
        except RuntimeError as exc:
            raise RegistryError(str(exc)) from None
        try:
            with transaction.atomic():
                return Demonstrator.objects.create(study=study, designator=designator, headset=headset,
                                                   created_by=signed_in_user(actor, required=False))
        except IntegrityError:
            continue
    raise RegistryError("could not store a unique designator; try again")


def registered_demonstrator(study: Study, designator: str) -> Demonstrator:
    """The study's demonstrator a recording names; RegistryError when the designator is blank or unknown.

    A look-up only: ingest never creates a demonstrator (a coordinator does, see ``create_demonstrator``).
    """
    typed = normalise_designator(designator)
    if not typed:
        raise RegistryError("capture.json names no demonstrator (a blank designator): register one for this "
                            "recording, record their consent, then re-check")
    with study_scope(study=study):
        demonstrator = Demonstrator.objects.filter(designator=typed).first()
    if demonstrator is None:
        raise RegistryError(f"demonstrator {typed!r} is not registered in study {study.code}")
    return demonstrator
