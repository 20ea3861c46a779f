"""Fixtures shared by the whole suite."""

from __future__ import annotations

import functools
import os
import threading
import uuid
from datetime import datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TEST_OUTPUT = Path(os.environ.get("CERES_TEST_OUTPUT", REPO / "test-output"))


def pytest_configure(config: pytest.Config) -> None:
    from tests import skip_policy

    skip_policy.configure(config)
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        _buckets_of_worker(worker)


def _buckets_of_worker(worker: str) -> None:
    """Run in parallel (``pytest -n``), each worker process has S3 buckets of its own: tests that share a prefix
    (the demo study's, a study code made from the time) never meet. Made here, before any storage is opened,
    for this process's storages and (through the environment) for the worker processes its tests start."""
    from django.conf import settings

    if settings.STORAGE_BACKEND != "s3":
        return  # local folders: each test's are its own already
    import boto3
    from botocore.exceptions import ClientError

    client = None
    for name in settings.STORAGE_NAMES:
        options = settings.STORAGES[name]["OPTIONS"]
        bucket = options["bucket_name"] = f"{options['bucket_name']}-{worker}"
        os.environ[f"CERES_S3_BUCKET_{name.upper()}"] = bucket
        client = client or boto3.client(
            "s3", endpoint_url=options["endpoint_url"], aws_access_key_id=options["access_key"],
            aws_secret_access_key=options["secret_key"], region_name=options["region_name"])
        try:
            client.create_bucket(Bucket=bucket)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise


@pytest.fixture(scope="session", autouse=True)
def _flush_past_append_only_triggers():
    """A transactional test (``transaction=True``, ``live_server``) ends with Django's flush, which on SQLite empties
    each table with DELETE: the append-only triggers would refuse it. Here the SQLite backend's flush SQL drops the
    triggers of the tables it empties first and makes them again after, in the flush's one transaction, so the
    tables are emptied and no test ever runs without the triggers. PostgreSQL's flush is TRUNCATE, which the
    append-only tables' statement triggers refuse: there the flush disables those triggers, truncates and enables
    them again, also in its one transaction (ALTER TABLE is transactional on PostgreSQL). Only the test suite does
    this: ``manage.py flush`` on a portal is refused on either database."""
    from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
    from django.db.backends.sqlite3.base import DatabaseOperations  # (the base first: it imports the operations)

    flush = DatabaseOperations.sql_flush
    postgres_flush = PostgresOperations.sql_flush

    @functools.wraps(flush)  # __wrapped__: Django's own, for the test that shows what it does
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        statements = flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        if not statements:
            return statements
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
            triggers = [(name, sql) for name, table, sql in cursor.fetchall() if table in tables]
        return [*(f'DROP TRIGGER "{name}"' for name, _ in triggers), *statements, *(sql for _, sql in triggers)]

    @functools.wraps(postgres_flush)  # __wrapped__: Django's own
    def postgres_sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        statements = postgres_flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        if not statements:
            return statements
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT relname, tgname FROM pg_trigger JOIN pg_class ON pg_class.oid = tgrelid "
                           "WHERE NOT tgisinternal AND tgtype & 32 = 32 AND relname = ANY(%s) ORDER BY tgname",
                           [list(tables)])  # tgtype bit 5: a TRUNCATE trigger
            triggers = cursor.fetchall()
        return [*(f'ALTER TABLE "{table}" DISABLE TRIGGER "{name}"' for table, name in triggers), *statements,
                *(f'ALTER TABLE "{table}" ENABLE TRIGGER "{name}"' for table, name in triggers)]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "sql_flush", sql_flush)
        patch.setattr(PostgresOperations, "sql_flush", postgres_sql_flush)
        yield


@pytest.fixture(scope="session", autouse=True)
def _live_server_requests_one_at_a_time_on_sqlite():
    """On SQLite the live server's request threads share the test's one in-memory connection, so two requests
    writing at once (each fetch through a portal download link is an audit event) would interleave their
    transactions on it. There the portal's handling of each request (up to the response, not the streaming of
    its body) runs one at a time. PostgreSQL gives each thread its own connection: nothing changes there, nor in
    the product, where every thread has its own connection on either database."""
    from django.core.servers.basehttp import ServerHandler
    from django.db import connection

    lock = threading.Lock()
    run = ServerHandler.run

    @functools.wraps(run)
    def run_one_at_a_time(self, application):
        if connection.vendor != "sqlite":
            return run(self, application)

        def one_at_a_time(environ, start_response):
            with lock:
                return application(environ, start_response)

        return run(self, one_at_a_time)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ServerHandler, "run", run_one_at_a_time)
        yield


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


@pytest.fixture(autouse=True)
def _own_audit_checkpoints(settings):
    """Each test reads and writes signed audit checkpoints of its own: its database starts empty, so another test's
    checkpoint (in a shared S3 bucket, or a running portal's in the data folder) would name events it never had."""
    settings.CERES_AUDIT_CHECKPOINT_PREFIX = f"audit/checkpoints-test-{uuid.uuid4().hex}/"


@pytest.fixture
def demo(db):
    """The demo study with one user per role (coordinator, ethics1, ethics2, researcher; password ceres-demo-<name>)."""
    from django.core.management import call_command

    from portal.studies.models import Study

    call_command("demo_setup", stdout=open(os.devnull, "w"))  # noqa: SIM115
    _clear_demo_objects()
    return Study.objects.get(code="demo")


def _clear_demo_objects() -> None:
    """Every test makes its own demo study, but on S3 the buckets are shared by the whole run: objects an
    earlier test stored under the demo study's prefixes (its release-0001, say) would be taken for another's."""
    from django.conf import settings
    from django.core.files.storage import storages

    from portal.core import storage

    if settings.STORAGE_BACKEND != "s3":
        return
    for name, prefix in (("captures", "demo/"), ("shards", "demo/"), ("releases", "releases/demo/"),
                         ("releases", "datasets/demo/")):
        storage.delete_prefix(storages[name], prefix)


@pytest.fixture
def make_user(db):
    """Create a user, optionally with roles in a study: ``make_user("alice", study, ["coordinator"])``; a researcher
    grant ends in 30 days unless ``expires_at`` is given."""
    from django.contrib.auth import get_user_model

    from portal.access.services import grant_role

    def make(username: str, study=None, roles=(), *, expires_at: datetime | None = None, password: str = "pw-" * 4):
        from datetime import timedelta

        from django.utils import timezone

        user = get_user_model().objects.create_user(username, password=password)
        for role in roles:
            # A researcher grant always ends: 30 days unless the test says when.
            ends = expires_at or (timezone.now() + timedelta(days=30) if role == "researcher" else None)
            grant_role("test", user, study, role, expires_at=ends)
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
