"""Hooks into the registry: a consent withdrawal opens its withdrawal job, in the withdrawal's transaction."""

from django.dispatch import receiver

from portal.research.services.withdrawals import open_withdrawal
from portal.studies.signals import consent_withdrawn


@receiver(consent_withdrawn, dispatch_uid="research.open_withdrawal")
def withdrawal_recorded(sender, demonstrator, event, **kwargs) -> None:
    open_withdrawal(event)
