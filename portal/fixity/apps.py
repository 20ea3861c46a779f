from django.apps import AppConfig


class FixityConfig(AppConfig):
    name = "portal.fixity"
    label = "fixity"
    verbose_name = "Fixity and alerts"

    def ready(self):
        from portal.fixity import dashboard  # noqa: F401  (the alerts item of the ethics officers' panel)
