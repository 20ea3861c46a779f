"""What the fixity check expects to find in storage: each app declares the objects its records account for.

- A **root** is a prefix of a storage whose first level is a study's code: ``<study>/`` in the shards and the
  captures storage (root ``""``), ``releases/<study>/`` and ``datasets/<study>/`` in the releases storage. The
  check lists everything under the roots (but a folder declared another part's, the captures bucket's
  ``inbox/``) and the units' folders, nothing else. The audit log's checkpoints are units of no study
  (``portal/fixity/audit_checkpoints.py``).
- A **unit** is a folder that one record owns, and says what must be under it: exactly the ``expected`` objects
  (each with its SHA-256, and its length when the record has it); anything (``claimed``: a job still writing it,
  an export, a release or a dataset build, whose objects are listed but not checked); or nothing (``absent``:
  records say its objects were removed, and why). ``expected`` is a function, called only when the unit is
  checked, so a run reads the database rows of the units it checks and no others.
- Units nest: an object belongs to the deepest unit whose folder holds it, and an expected object that lies in
  a nested unit's folder is left to that unit. Several units of the same folder (from several sources) combine:
  ``absent`` wins (the folder must be empty), then ``claimed``; otherwise their expected objects together.
  So a later feature declares what it adds without touching the sources it amends: an episode withdrawn from a
  release is an ``absent`` unit for its folder inside the release's, a tombstone an ``expected`` unit beside it.
- An object under a root that no unit holds is an **orphan**.

Sources are registered with ``@source`` (``portal/recordings/fixity.py``, ``portal/releases/fixity.py``,
``portal/research/fixity.py``, imported by their apps' ``ready``); each is called with the studies a run covers
(``None``: all) outside any study scope, and yields its units.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import QuerySet


@dataclass(frozen=True)
class Expected:
    """One object a record accounts for: its key, its SHA-256 and its length (None when the record has none)."""

    name: str
    sha256: str
    size: int | None = None


@dataclass(frozen=True)
class Unit:
    """A folder (``prefix``, ending in ``/``) of a storage that a record of study ``study_id`` owns; ``label``
    names the record in the problems found there ("episode-000003", "release-0001")."""

    storage: str
    prefix: str
    study_id: int | None  # None: a folder of no study (the audit log's checkpoints)
    label: str
    expected: Callable[[], Iterable[Expected]] | None = None
    claimed: bool = False
    absent: str = ""  # why nothing may be there

    def __post_init__(self):
        if not self.prefix.endswith("/"):
            raise ValueError(f"a unit is a folder: {self.prefix!r} does not end in '/'")
        if sum((self.expected is not None, self.claimed, bool(self.absent))) != 1:
            raise ValueError(f"unit {self.prefix}: give exactly one of expected, claimed or absent")

    @property
    def key(self) -> str:
        return f"{self.storage}:{self.prefix}"


@dataclass(frozen=True)
class Combined:
    """The units several sources declared for one folder, as the check sees them: ``label`` is the first's,
    ``expected`` each expecting unit's label and function."""

    storage: str
    prefix: str
    study_id: int | None
    label: str
    expected: tuple[tuple[str, Callable[[], Iterable[Expected]]], ...] = ()
    claimed: bool = False
    absent: str = ""

    @property
    def key(self) -> str:
        return f"{self.storage}:{self.prefix}"

    def expected_objects(self) -> dict[str, tuple[Expected, str]]:
        """Every expected object by name, with the label of the unit that expects it."""
        return {item.name: (item, label) for label, load in self.expected for item in load()}


@dataclass
class _Registry:
    roots: list[tuple[str, str]] = field(default_factory=list)
    other_parts: set[tuple[str, str]] = field(default_factory=set)
    sources: list[Callable[[QuerySet | None], Iterable[Unit]]] = field(default_factory=list)


_REGISTRY = _Registry()


def root(storage: str, prefix: str) -> None:
    """Declare that everything under ``prefix`` of ``storage`` is accounted for by units (or is an orphan)."""
    if prefix and not prefix.endswith("/"):
        raise ValueError(f"a root is a folder: {prefix!r} does not end in '/'")
    if (storage, prefix) not in _REGISTRY.roots:
        _REGISTRY.roots.append((storage, prefix))


def other_part(storage: str, prefix: str) -> None:
    """Declare a folder directly under a root that another part of the portal keeps (the captures bucket's
    ``inbox/``): the check does not list it."""
    _REGISTRY.other_parts.add((storage, prefix))


def is_other_part(storage: str, prefix: str) -> bool:
    return (storage, prefix) in _REGISTRY.other_parts


def source(provider: Callable[[QuerySet | None], Iterable[Unit]]) -> Callable:
    """Decorator: ``provider(studies)`` yields the units of the studies given (every study when None)."""
    if provider not in _REGISTRY.sources:
        _REGISTRY.sources.append(provider)
    return provider


def unregister(provider: Callable) -> None:
    """Take a source out again (tests that declare one of their own)."""
    _REGISTRY.sources.remove(provider)


def roots() -> list[tuple[str, str]]:
    return list(_REGISTRY.roots)


def units(studies: QuerySet | None = None) -> dict[str, Combined]:
    """Every unit of the studies given, the units of one folder combined, by key (``storage:prefix``)."""
    combined: dict[str, Combined] = {}
    for provider in _REGISTRY.sources:
        for unit in provider(studies):
            expected = ((unit.label, unit.expected),) if unit.expected else ()
            before = combined.get(unit.key)
            if before is None:
                combined[unit.key] = Combined(unit.storage, unit.prefix, unit.study_id, unit.label, expected,
                                              unit.claimed, unit.absent)
                continue
            combined[unit.key] = Combined(unit.storage, unit.prefix, before.study_id, before.label,
                                          before.expected + expected, before.claimed or unit.claimed,
                                          before.absent or unit.absent)
    return combined
