
import pytest
from django_scopes import scope

from exporter.designator import family_pair
from portal.audit.models import AuditEvent
from portal.studies.exceptions import RegistryError
from portal.studies.models import Demonstrator
from portal.studies.services.demonstrators import create_demonstrator, registered_demonstrator
from portal.studies.services.headsets import register_headset


def test_generated_designator_carries_the_headsets_family_pair(study, coordinator, headset):
    pair = "-".join(family_pair("HS-0001"))
    designators = {create_demonstrator(coordinator, study, headset=headset).designator for _ in range(30)}
    assert len(designators) == 30
    assert all(d.startswith(pair + "-") for d in designators)
    assert AuditEvent.objects.filter(action="demonstrator.created").count() == 30


def test_typed_designator_is_normalised_and_validated(study, coordinator):
    assert create_demonstrator(coordinator, study, designator=" Able-Acorn-Fox-Oak ").designator == "able-acorn-fox-oak"
    with pytest.raises(RegistryError, match="already used in study alpha"):
        create_demonstrator(coordinator, study, designator="able-acorn-fox-oak")
    with pytest.raises(RegistryError, match="'alice' is not in the word1 list"):
        create_demonstrator(coordinator, study, designator="alice-acorn-fox-oak")
    with pytest.raises(RegistryError, match="4 parts"):
        create_demonstrator(coordinator, study, designator="Alice Smith")


def test_typed_designator_must_match_the_headsets_pair(study, coordinator, headset):
    with pytest.raises(RegistryError, match="family pair"):
        create_demonstrator(coordinator, study, designator="able-acorn-fox-oak", headset=headset)
    typed = "-".join(family_pair("HS-0001")) + "-fox-oak"
    assert create_demonstrator(coordinator, study, designator=typed, headset=headset).headset == headset


def test_headset_of_another_study_is_refused(study, coordinator, make_study):
    other = make_study("beta")
    foreign = register_headset(coordinator, other, headset_id="HS-9")
    with pytest.raises(RegistryError, match="another study"):
        create_demonstrator(coordinator, study, headset=foreign)


def test_a_recording_with_a_blank_designator_creates_no_demonstrator(study, headset):
    with pytest.raises(RegistryError, match="names no demonstrator"):
        registered_demonstrator(study, "  ")
    with scope(study=study):
        assert not Demonstrator.objects.exists()


def test_recording_with_a_designator_needs_a_registered_one(study, coordinator, demonstrator, make_study):
    assert registered_demonstrator(study, demonstrator.designator.upper()) == demonstrator
    with pytest.raises(RegistryError, match="not registered in study beta"):
        registered_demonstrator(make_study("beta"), demonstrator.designator)


def test_no_column_can_hold_a_name():
    # The designator is the only free-text identity, and it must pass the word-list validation.
    text_fields = {f.name for f in Demonstrator._meta.get_fields() if f.get_internal_type() in
                   {"CharField", "TextField"}}
    assert text_fields == {"designator"}


def test_many_demonstrators_on_one_headset_stay_unique(study, coordinator, headset):
    made = [create_demonstrator(coordinator, study, headset=headset).designator for _ in range(200)]
    assert len(set(made)) == 200


def test_a_designator_taken_between_check_and_insert_is_drawn_again(study, coordinator, monkeypatch):
    from portal.studies.services import demonstrators

    create_demonstrator(coordinator, study, designator="able-acorn-fox-oak")
    draws = iter(["able-acorn-fox-oak", "able-acorn-fox-oak", "able-acorn-owl-oak"])
    # A concurrent writer: the check said free, but the row exists when this writer inserts.
    monkeypatch.setattr(demonstrators, "generate_designator", lambda headset_id, is_taken: next(draws))
    assert create_demonstrator(coordinator, study).designator == "able-acorn-owl-oak"
