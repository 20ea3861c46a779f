from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "portal.releases"
    label = "releases"
    verbose_name = "Releases"

    def ready(self):
        from portal.releases import audit_history, checks, dashboard, fixity, receivers  # noqa: F401  (a recording's audit history, dashboard, key check, released objects, tags)
