"""The roles a user holds in a study: the vocabulary every app names them by. Grants of these roles, and the checks
that read them, are ``portal.access``'s."""

from django.db import models


class Role(models.TextChoices):
    COORDINATOR = "coordinator", "Study coordinator"
    ETHICS_OFFICER = "ethics_officer", "Ethics officer"
    RESEARCHER = "researcher", "Researcher"
