from django.apps import AppConfig


class FacesConfig(AppConfig):
    name = "portal.faces"
    label = "faces"
    verbose_name = "Faces"

    def ready(self):
        from portal.faces import fixity, receivers  # noqa: F401  (stored detections; detection queued when an episode is verified)
