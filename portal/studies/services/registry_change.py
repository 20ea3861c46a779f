"""What every registry change shares: a signed-in person as its actor, today's date, a study that is open."""

from __future__ import annotations

from datetime import date

from django.utils import timezone

from portal.studies.exceptions import RegistryError
from portal.studies.models import Study


def today() -> date:
    return timezone.localdate()


def signed_in_user(actor, *, required: bool = True):
    """The user to store in a ``*_by`` column. Registry changes need a signed-in person; with
    ``required=False`` a system actor (ingest, a command) gives None."""
    if getattr(actor, "is_authenticated", False):
        return actor
    if required:
        raise RegistryError("this registry change needs a signed-in user as its actor")
    return None


def check_open_for_registry(study: Study) -> None:
    if study.status == Study.Status.CLOSED:
        raise RegistryError(f"study {study.code} is closed; its registry takes no new entries")
