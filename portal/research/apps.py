from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "portal.research"
    label = "research"
    verbose_name = "Researcher access"

    def ready(self):
        from portal.releases import made_by
        from portal.releases.services import manifest
        from portal.research import dashboard, fixity  # noqa: F401  (dashboard items, stored objects)
        from portal.research.services.withdrawals import episodes_taken, withdrawal_of

        made_by.register_lookup(withdrawal_of)  # a superseding release made before requests named their withdrawal
        manifest.read_withdrawals_with(episodes_taken)  # a superseding release's withdrawal, checked at signing
