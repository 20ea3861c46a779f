from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "portal.research"
    label = "research"
    verbose_name = "Researcher access"

    def ready(self):
        from portal.research import dashboard, fixity, receivers  # noqa: F401  (items, stored objects, withdrawals)
