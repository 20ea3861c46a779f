from django.apps import AppConfig


class StudiesConfig(AppConfig):
    name = "portal.studies"
    label = "studies"
    verbose_name = "Studies"

    def ready(self):
        from portal.studies import audit_history, dashboard  # noqa: F401  (a demonstrator's history in the audit log; the dashboard items)
