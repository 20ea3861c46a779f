from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The top floor: it may use every app and none uses it. ``manage.py demo_setup`` (a demo study with one user
    per role) and ``manage.py seed_scale`` (a study the size of a year's work, ``seeding.py``)."""

    name = "portal.demo"
    label = "demo"
    verbose_name = "Demo and scale data"
