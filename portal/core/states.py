"""What every model with a state machine shares: the check of a move against the model's table, the row lock
that keeps a state check true until the transaction ends, and ``transition``, the one way any of them changes
state (the row locked, the move checked, the object saved with the named fields, one audit event).

A model declares its ``state`` field, its ``TRANSITIONS`` table (a state to the states it may become), the
error its domain raises for a forbidden move and the message naming it; the services around it keep what is
theirs and hand it to ``transition``: the audit action, what the event's before and after record (``snapshot``,
``after``), what else the move writes before its event (``effects``) and what follows it (their own log lines
and notifications, after the call).

``portal.core`` sits below every app, the audit app included, so it does not import ``portal.audit``: the audit
app hands its ``record`` function to ``audit_with`` when Django starts (``AuditConfig.ready``), and ``transition``
appends its event through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db import models, transaction


class StateMachineModel(models.Model):
    """A model whose ``state`` moves only as ``TRANSITIONS`` allows; a forbidden move raises the model's
    ``illegal_transition`` with ``transition_refusal(state)`` and changes nothing."""

    TRANSITIONS: ClassVar[dict[str, frozenset[str]]]
    illegal_transition: ClassVar[type[Exception]]

    class Meta:
        abstract = True

    def can_move_to(self, state: str) -> bool:
        return state in self.TRANSITIONS[self.state]

    def move_to(self, state: str) -> None:
        """Set the new state (not saved); the model's ``illegal_transition`` when the table has no such move."""
        if not self.can_move_to(state):
            raise self.illegal_transition(self.transition_refusal(state))
        self.state = state

    def transition_refusal(self, state: str) -> str:
        """The message of a refused move to ``state``, for the person who asked."""
        raise NotImplementedError


def lock_fresh(obj: models.Model) -> None:
    """Lock ``obj``'s row and reload it, so a state check holds until the transaction ends (two clicks, or the
    page and the API at once, act once)."""
    type(obj).objects.select_for_update(of=("self",), no_key=True).only("pk").get(pk=obj.pk)
    obj.refresh_from_db()


_record: Callable[..., Any] | None = None


def audit_with(record: Callable[..., Any]) -> None:
    """Called once by the audit app when Django starts: the function that appends an audit event
    (``record(actor, action, target, before=..., after=...)``)."""
    global _record
    _record = record


def state_only(obj: StateMachineModel) -> dict[str, Any]:
    """What a move's audit event records by default, before and after: the state."""
    return {"state": obj.state}


def transition(actor, obj: StateMachineModel, state: str, *, action: str,
               snapshot: Callable[[Any], dict[str, Any]] = state_only, after: dict[str, Any] | None = None,
               effects: Callable[[Any], None] | None = None, if_allowed: bool = False, **fields) -> bool:
    """Move ``obj`` to ``state`` with ``fields``, in the caller's transaction: its row is locked (at no cost when
    the caller holds the lock already) and the move checked against the state the locked row holds; ``obj`` is
    saved with ``fields`` set on it; ``effects(obj)``, if given, writes what else belongs to the move; then one
    audit event ``action`` records ``snapshot(obj)`` before and after the move (``after`` added to the latter).

    A move the table forbids raises the model's ``illegal_transition`` and writes nothing; with ``if_allowed`` it
    is skipped instead (False is returned: the caller's "unless it has moved on meanwhile"). True when moved."""
    if _record is None:
        raise RuntimeError("no audit record function: the audit app registers it when Django starts")
    with transaction.atomic():
        obj.state = (type(obj)._base_manager.select_for_update(no_key=True).filter(pk=obj.pk)
                     .values_list("state", flat=True).get())
        if if_allowed and not obj.can_move_to(state):
            return False
        before = snapshot(obj)
        obj.move_to(state)
        for name, value in fields.items():
            setattr(obj, name, value)
        obj.save()
        if effects is not None:
            effects(obj)
        _record(actor, action, obj, before=before, after={**snapshot(obj), **(after or {})})
    return True
