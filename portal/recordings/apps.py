from django.apps import AppConfig


class RecordingsConfig(AppConfig):
    name = "portal.recordings"
    label = "recordings"
    verbose_name = "Recordings"

    def ready(self):
        from portal.recordings import dashboard, fixity  # noqa: F401  (dashboard items, stored shards)
