"""Thin Celery tasks over the research services: an id in, the object loaded in its study's scope
(``StudyTask``), one service called. The dataset build runs on the heavy queue (settings' routes). Beat's daily
reminders of access that ends keep the name they had when the notifications app held them."""

from __future__ import annotations

from celery import shared_task

from portal.core.tasks import StudyTask
from portal.research import notices
from portal.research.models import Dataset, Withdrawal
from portal.research.services import datasets, withdrawals


@shared_task(bind=True, base=StudyTask, name="research.build_dataset", model=Dataset,
             on_transient=staticmethod(datasets.note_retry),
             give_up=staticmethod(lambda dataset, reason: datasets.fail_dataset(dataset, reason)))
def build_dataset(self, dataset: Dataset) -> None:
    datasets.build_dataset(dataset.pk)


@shared_task(bind=True, base=StudyTask, name="research.apply_withdrawal", model=Withdrawal,
             on_transient=staticmethod(withdrawals.note_retry),
             give_up=staticmethod(lambda withdrawal, reason: withdrawals.fail(withdrawal, reason)))
def apply_withdrawal(self, withdrawal: Withdrawal) -> None:
    withdrawals.apply_withdrawal(withdrawal.pk)


@shared_task(name="notifications.access_reminders")
def access_reminders() -> int:
    return notices.access_reminders()
