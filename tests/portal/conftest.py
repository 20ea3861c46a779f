"""Fixtures of the portal's tests: fast password hashing, and a study with its coordinator."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def study(make_study):
    return make_study("alpha")


@pytest.fixture
def coordinator(make_user, study):
    return make_user("coord", study, ["coordinator"])
