from django.apps import AppConfig


class FacesConfig(AppConfig):
    name = "portal.faces"
    label = "faces"
    verbose_name = "Faces"

    def ready(self):
        from portal.faces import receivers  # noqa: F401  (detection queued when an episode is verified)
