from django.apps import AppConfig


class StudiesConfig(AppConfig):
    name = "portal.studies"
    label = "studies"
    verbose_name = "Studies"

    def ready(self):
        from portal.studies import dashboard  # noqa: F401  (registers the dashboard items)
