"""The audit jobs: a signed checkpoint of the chain's head a few seconds after events commit
(``CERES_AUDIT_CHECKPOINT_DELAY_SECONDS``, sent by ``services.checkpoint_soon``) and from beat every
``CERES_AUDIT_CHECKPOINT_MINUTES``, and a full verification of the chain every day (on the heavy queue: it reads every
event)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache

from portal.audit import services
from portal.audit.exceptions import CheckpointRefused
from portal.audit.models import ChainVerification
from portal.core.storage import TRANSIENT_ERRORS

log = logging.getLogger(__name__)


@shared_task(name="audit.write_checkpoint", autoretry_for=TRANSIENT_ERRORS, retry_backoff=2, retry_backoff_max=300,
             max_retries=6)
def write_checkpoint() -> int | None:
    """The seq the new checkpoint names (None while the log is empty). A refusal is logged as an error and the
    task fails: the chain does not extend the last checkpoint, which ``audit_verify`` then names too."""
    cache.delete(services.CHECKPOINT_PENDING)  # events committed from now on send the next one
    try:
        checkpoint = services.write_checkpoint()
    except CheckpointRefused as exc:
        log.error("audit checkpoint refused: %s", exc)
        raise
    return checkpoint.seq if checkpoint else None


@shared_task(name="audit.verify_chain", autoretry_for=TRANSIENT_ERRORS, retry_backoff=2, retry_backoff_max=300,
             max_retries=6)
def verify_chain() -> bool:
    """Whether the chain verified; recorded either way, and a problem logged as an error."""
    report = services.run_verification(ChainVerification.Via.TASK)
    if not report.ok:
        log.error("%s", report)
    return report.ok
