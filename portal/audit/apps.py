import sys

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AuditConfig(AppConfig):
    name = "portal.audit"
    label = "audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        from portal.audit import checks, fixity  # noqa: F401  (the audit key's deploy check; checkpoints' fixity)
        from portal.audit.services import record
        from portal.core.states import audit_with

        audit_with(record)  # every state machine's move is one audit event (core sits below audit)

        post_migrate.connect(checkpoint_after_migrate, sender=self, dispatch_uid="audit.checkpoint_after_migrate")


def checkpoint_after_migrate(sender, using="default", verbosity=1, stdout=None, **kwargs) -> None:
    """``migrate`` ends with a signed checkpoint of the audit chain's head (``services.checkpoint_at_migrate``). A
    refusal or an unreachable storage is said and does not fail the migration: ``audit_verify`` names the problem,
    and ``audit_checkpoint --restart`` (after a restore from a backup) starts the checkpoints afresh."""
    from portal.audit.services import checkpoint_at_migrate
    from portal.core.errors import ServiceError
    from portal.core.storage import TRANSIENT_ERRORS

    out = stdout or sys.stdout
    try:
        made = checkpoint_at_migrate(using)
    except (ServiceError, *TRANSIENT_ERRORS) as exc:
        out.write(f"audit checkpoint not written: {exc}\n")
        return
    if made is not None and verbosity:
        out.write(f"  audit checkpoint of seq {made.seq} written to {made.name}\n")
