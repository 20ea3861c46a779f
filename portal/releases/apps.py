from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "portal.releases"
    label = "releases"
    verbose_name = "Releases"

    def ready(self):
        from portal.releases import checks, dashboard, fixity, receivers  # noqa: F401  (dashboard, key check, released objects, tags)
