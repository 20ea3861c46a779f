"""A local storage that keeps a journal of what it stores, and can be told to fail once, before its n-th object:
the shard upload's order and its crash points are read from it (``test_shard_upload.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.files.storage import FileSystemStorage

from portal.core import storage as object_storage


@dataclass(frozen=True)
class Save:
    name: str
    present: frozenset[str]  # the objects under the same episode folder just before this one was stored
    failed: bool


class JournaledStorage(FileSystemStorage):
    """``fail_once_at``: the n-th save (from 0) raises ``ConnectionRefusedError`` (a storage outage, transient)
    instead of storing its object; the saves after it succeed."""

    def __init__(self, *args, fail_once_at: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_once_at = fail_once_at
        self.saves: list[Save] = []

    def _save(self, name: str, content) -> str:
        folder = name[: name.index("/episode-") + len("/episode-000000/")] if "/episode-" in name else ""
        present = frozenset(object_storage.walk(self, folder)) if folder else frozenset()
        failing = len(self.saves) == self.fail_once_at
        self.saves.append(Save(name, present, failing))
        if failing:
            raise ConnectionRefusedError(f"storage outage injected before {name}")
        return super()._save(name, content)
