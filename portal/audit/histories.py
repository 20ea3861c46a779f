"""The wider histories a study's audit log follows: the log filters by one (``study_log.LogFilter``), and an
object's events link to the history the object belongs to. The app that can read a history's objects registers it
when it loads (``register``, from its ``ready()``), the way apps register their fixity sources; audit itself names
no other app's model.

- ``recording`` (``portal/releases/audit_history.py``): a recording from upload to release;
- ``demonstrator`` (``portal/studies/audit_history.py``): a demonstrator from consent to withdrawal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q


@dataclass(frozen=True)
class History:
    """``name``: the log filter's field and URL parameter. ``find(value)``: the object of the current study a
    filter's value names, None for an empty value, ``ValidationError`` (saying why) when there is none.
    ``value(obj)``: the value naming the object (the inverse of ``find``). ``events(obj)``: the condition on
    ``AuditEvent`` rows of its history. ``targets``: the object types whose events belong to such a history;
    ``owner(target_type, pk)``: for one of them, the value and label of the history it belongs to, or None when
    the object is no longer there."""

    name: str
    find: Callable[[str], Any]
    value: Callable[[Any], str]
    events: Callable[[Any], Q]
    targets: tuple[str, ...]
    owner: Callable[[str, int], tuple[str, str] | None]


_HISTORIES: dict[str, History] = {}


def register(history: History) -> None:
    _HISTORIES[history.name] = history


def named(name: str) -> History:
    """The history registered as ``name`` (``KeyError`` when no app registered it)."""
    return _HISTORIES[name]


def belonging(target_type: str) -> History | None:
    """The history the events of objects of ``target_type`` belong to, if any."""
    return next((history for history in _HISTORIES.values() if target_type in history.targets), None)
