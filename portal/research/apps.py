from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "portal.research"
    label = "research"
    verbose_name = "Researcher access"

    def ready(self):
        from portal.releases.services import manifest
        from portal.research import dashboard, fixity, receivers  # noqa: F401  (items, stored objects, withdrawals)
        from portal.research.services.withdrawals import episodes_taken

        manifest.read_withdrawals_with(episodes_taken)  # a superseding release's withdrawal, checked at signing
