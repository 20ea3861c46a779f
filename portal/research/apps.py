from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "portal.research"
    label = "research"
    verbose_name = "Researcher access"

    def ready(self):
        from portal.releases import made_by
        from portal.research import dashboard, fixity  # noqa: F401  (dashboard items, stored objects)
        from portal.research.services.withdrawals import withdrawal_of

        made_by.register_lookup(withdrawal_of)  # a superseding release made before requests named their withdrawal
