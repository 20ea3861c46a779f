from django.apps import AppConfig


class FixityConfig(AppConfig):
    name = "portal.fixity"
    label = "fixity"
    verbose_name = "Fixity and alerts"

    def ready(self):
        from portal.access.permissions import add_navigation_column
        from portal.fixity import audit_checkpoints, dashboard  # noqa: F401  (the audit checkpoints' units; the alerts item of the ethics officers' panel)
        from portal.fixity.services.alerts import open_alerts_per_study

        add_navigation_column("open_alerts", open_alerts_per_study)  # the alert banner's counts
