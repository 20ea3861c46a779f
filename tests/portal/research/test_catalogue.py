"""The catalogue of released episodes (services/catalogue.py): a release's files list every object it stored."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from portal.core import storage
from portal.research.services import catalogue

pytestmark = pytest.mark.django_db


def test_catalogue_release_files_lists_every_object(released):
    with scope(study=released.study):
        files = catalogue.release_files(released)
    assert sorted(name for name, _ in files.values()) == storage.walk(storages["releases"], released.prefix)
