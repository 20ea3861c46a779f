from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "portal.core"
    label = "core"
    verbose_name = "Portal"

    def ready(self) -> None:
        from portal.core import integers  # noqa: F401  (registers the <uint:...> URL converter)
