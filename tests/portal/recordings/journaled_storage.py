"""A local storage that keeps a journal of what it stores, and can be told to fail once, before its n-th object:
the shard upload's order and its crash points are read from it (``test_shard_upload.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from portal.core import storage


@dataclass(frozen=True)
class Save:
    name: str
    present: frozenset[str]  # the objects under the same episode folder just before this one was stored
    failed: bool


class JournaledStorage(FileSystemStorage):
    """``fail_once_at``: the n-th save (from 0) raises ``ConnectionRefusedError`` (a storage outage, transient)
    instead of storing its object; the saves after it succeed. ``corrupt_once_at``: the n-th save stores its
    object with the last byte changed (a faulty disk or gateway)."""

    def __init__(self, *args, fail_once_at: int | None = None, corrupt_once_at: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_once_at = fail_once_at
        self.corrupt_once_at = corrupt_once_at
        self.saves: list[Save] = []

    def _save(self, name: str, content) -> str:
        folder = name[: name.index("/episode-") + len("/episode-000000/")] if "/episode-" in name else ""
        present = frozenset(storage.walk(self, folder)) if folder else frozenset()
        number = len(self.saves)
        failing = number == self.fail_once_at
        self.saves.append(Save(name, present, failing))
        if failing:
            raise ConnectionRefusedError(f"storage outage injected before {name}")
        if number == self.corrupt_once_at:
            data = content.read()
            content = ContentFile(data[:-1] + bytes([data[-1] ^ 1]))
        return super()._save(name, content)
