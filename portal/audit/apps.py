from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "portal.audit"
    label = "audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        from portal.audit import checks  # noqa: F401  (the audit key's deploy check)
