"""What every model with a state machine shares: the check of a move against the model's table, the row lock
that keeps a state check true until the transaction ends, and the move saved with its fields.

A model declares its ``state`` field, its ``TRANSITIONS`` table (a state to the states it may become), the
error its domain raises for a forbidden move and the message naming it; the services around it keep what is
theirs (what a move's audit event records, what else it writes)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models


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


def save_move(obj: StateMachineModel, state: str, fields: dict[str, Any]) -> None:
    """Move ``obj`` to ``state`` (refused as its table says), set ``fields`` on it and save it, in the caller's
    transaction."""
    obj.move_to(state)
    for name, value in fields.items():
        setattr(obj, name, value)
    obj.save()
