"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TEST_OUTPUT = Path(os.environ.get("CERES_TEST_OUTPUT", REPO / "test-output"))


def pytest_configure(config: pytest.Config) -> None:
    from tests import skip_policy

    skip_policy.configure(config)


@pytest.fixture(scope="session")
def test_output() -> Path:
    TEST_OUTPUT.mkdir(parents=True, exist_ok=True)
    return TEST_OUTPUT


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The API's request counts live in the cache: no test inherits another's (SQLite reuses user ids)."""
    yield
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def demo(db):
    """The demo study with one user per role (coordinator, ethics1, ethics2, researcher; password ceres-demo-<name>)."""
    from django.core.management import call_command

    from portal.studies.models import Study

    call_command("demo_setup", stdout=open(os.devnull, "w"))  # noqa: SIM115
    return Study.objects.get(code="demo")


@pytest.fixture
def make_user(db):
    """Create a user, optionally with roles in a study: ``make_user("alice", study, ["coordinator"])``."""
    from django.contrib.auth import get_user_model

    from portal.access.services import grant_role

    def make(username: str, study=None, roles=(), *, expires_at: datetime | None = None, password: str = "pw-" * 4):
        user = get_user_model().objects.create_user(username, password=password)
        for role in roles:
            grant_role("test", user, study, role, expires_at=expires_at)
        return user

    return make


@pytest.fixture
def make_study(db):
    from portal.studies.services.study import create_study

    def make(code: str, **fields):
        fields.setdefault("title", f"Study {code}")
        fields.setdefault("status", "active")
        return create_study("test", code=code, **fields)

    return make
