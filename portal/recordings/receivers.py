"""Hooks into the registry: a consent withdrawal purges the demonstrator's kept raw audio."""

from django.db import transaction
from django.dispatch import receiver
from django_scopes import scope

from portal.recordings.services import audio
from portal.studies.signals import consent_withdrawn


@receiver(consent_withdrawn, dispatch_uid="recordings.purge_audio_on_withdrawal")
def purge_audio_on_withdrawal(sender, demonstrator, event, **kwargs) -> None:
    def purge() -> None:
        with scope(study=demonstrator.study):
            audio.purge_for_withdrawal(demonstrator)

    # Storage objects are deleted, so only once the withdrawal is committed.
    transaction.on_commit(purge)
