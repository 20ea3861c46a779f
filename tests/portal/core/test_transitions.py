"""Every state machine changes state one way, ``core.states.transition``: walked through each model's
``TRANSITIONS``, every move of the table is saved and is exactly one audit event (the state before and after),
and every other move is refused with the model's error and changes nothing: no save, no audit event."""

from __future__ import annotations

import pytest
from django.apps import apps
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.core.states import StateMachineModel, transition
from portal.fixity.models import Alert
from portal.fixity.services.alerts import raise_alert
from portal.recordings.models import Recording
from portal.releases.models import ReleaseRequest
from portal.research.models import AccessRequest, Dataset, Withdrawal
from portal.research.services import catalogue, datasets
from tests.portal.research import conftest as research

(make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker, team,
 verified_factory, verified, make_request, agreement, make_released, make_researcher, researcher) = (
    research.make_capture, research.make_registry, research.private_storage, research.reg, research.sent_tasks,
    research.stored_objects, research.unique_code, research.worker, research.team, research.verified_factory,
    research.verified, research.make_request, research.agreement, research.make_released,
    research.make_researcher, research.researcher)

pytestmark = pytest.mark.django_db


def state_machines() -> set[type[StateMachineModel]]:
    return {model for model in apps.get_models() if issubclass(model, StateMachineModel)}


@pytest.fixture
def one_of_each(reg, make_released, verified, researcher, sent_tasks) -> dict[type[StateMachineModel], object]:
    """A saved object of every state machine, all in the registry's study."""
    release = make_released(verified(1))
    with scope(study=reg.study):
        items = list(catalogue.released_items().filter(request=release))
        dataset, _ = datasets.request_dataset(researcher, reg.study, items)
        event = reg.demonstrator.consent_events.get()
        return {
            Recording: Recording.objects.get(pk=items[0].episode.recording_id),
            ReleaseRequest: release,
            AccessRequest: AccessRequest.objects.get(study=reg.study, researcher=researcher),
            Dataset: dataset,
            Withdrawal: Withdrawal.objects.create(study=reg.study, event=event),
            Alert: raise_alert(reg.study, kind=Alert.Kind.FIXITY, message="a test alert", email=False),
        }


def _row(obj) -> dict:
    return type(obj)._base_manager.filter(pk=obj.pk).values().get()


def _last_seq() -> int:
    return AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0


def test_every_move_of_every_table_is_one_audit_event_and_any_other_move_is_refused(reg, one_of_each):
    assert set(one_of_each) == state_machines(), "a new state machine: add an object of it to the walk"
    walked = 0
    with scope(study=reg.study):
        for model, obj in one_of_each.items():
            assert set(model.TRANSITIONS) == set(model.State.values), model.__name__
            for source in model.TRANSITIONS:
                for target in model.State.values:
                    model._base_manager.filter(pk=obj.pk).update(state=source)
                    obj.refresh_from_db()
                    seq, row = _last_seq(), _row(obj)
                    where = f"{model.__name__} {source} -> {target}"
                    if target in model.TRANSITIONS[source]:
                        assert transition(reg.coordinator, obj, target, action="test.moved") is True, where
                        events = list(AuditEvent.objects.filter(seq__gt=seq))
                        assert [(e.action, e.target_id, e.before, e.after) for e in events] == [
                            ("test.moved", str(obj.pk), {"state": source}, {"state": target})], where
                        assert _row(obj)["state"] == target == obj.state, where
                        walked += 1
                        continue
                    with pytest.raises(model.illegal_transition):
                        transition(reg.coordinator, obj, target, action="test.moved")
                    assert transition(reg.coordinator, obj, target, action="test.moved", if_allowed=True) is False
                    assert _row(obj) == row and _last_seq() == seq, where
    assert walked == sum(len(targets) for model in one_of_each for targets in model.TRANSITIONS.values())


def test_the_move_is_checked_against_the_locked_row_not_a_stale_copy(reg):
    with scope(study=reg.study):
        alert = raise_alert(reg.study, kind=Alert.Kind.FIXITY, message="a test alert", email=False)
        Alert.objects.filter(pk=alert.pk).update(state=Alert.State.RESOLVED)  # resolved meanwhile, elsewhere
        seq = _last_seq()
        with pytest.raises(Alert.illegal_transition, match="the alert is resolved; it cannot become acknowledged"):
            transition(reg.coordinator, alert, Alert.State.ACKNOWLEDGED, action="alert.acknowledged")
        assert _last_seq() == seq and Alert.objects.get(pk=alert.pk).acknowledged_at is None


def test_a_move_saves_the_named_fields_and_records_what_the_snapshot_and_after_say(reg):
    with scope(study=reg.study):
        alert = raise_alert(reg.study, kind=Alert.Kind.FIXITY, message="a test alert", email=False)
        seen = []
        transition(reg.coordinator, alert, Alert.State.ACKNOWLEDGED, action="alert.acknowledged",
                   snapshot=lambda a: {"state": a.state, "note": a.acknowledged_note}, after={"extra": 1},
                   effects=lambda a: seen.append(_last_seq()), acknowledged_note="looking into it")
        event = AuditEvent.objects.order_by("-seq").first()
        assert Alert.objects.get(pk=alert.pk).acknowledged_note == "looking into it"
        assert (event.action, event.before, event.after) == (
            "alert.acknowledged", {"state": "open", "note": ""},
            {"state": "acknowledged", "note": "looking into it", "extra": 1})
        assert seen == [event.seq - 1]  # the effects come after the save, before the audit event
