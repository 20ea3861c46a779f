"""What the registry's services refuse, each with a message naming what is wrong."""

from __future__ import annotations

from typing import Any

from portal.core.errors import ServiceError


class StudyError(ServiceError):
    """A study change breaks a rule; the message says which."""


class RegistryError(StudyError):
    """A registry change or look-up breaks a rule; the message names what is wrong."""


class HeadsetImportError(RegistryError):
    """A headset CSV file has bad rows; ``errors`` lists ``(row number, reason)``, nothing was imported."""

    def __init__(self, errors: list[tuple[int, str]]):
        self.errors = errors
        shown = "; ".join(f"row {row}: {reason}" for row, reason in errors[:10])
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        super().__init__(f"{len(errors)} bad row(s); nothing was imported. {shown}{more}")

    def details(self) -> dict[str, Any]:
        return {"errors": [{"row": row, "reason": reason} for row, reason in self.errors]}
