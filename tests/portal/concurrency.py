"""Run calls at the same instant in threads, each with its own database connection (PostgreSQL tests)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

import pytest
from django.db import connections
from django_scopes import scope

needs_postgres = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                       reason="needs PostgreSQL: set DATABASE_URL=postgres://..."),
]


def run_at_once(study, calls: list[Callable[[], object]], *, expected: tuple[type[BaseException], ...] = ()
                ) -> list[object]:
    """Run the calls in threads released together by a barrier, inside ``study``'s scope when given.

    Returns each call's result or the exception of a type in ``expected`` it raised, in call order; any other
    exception fails the test.
    """
    barrier = threading.Barrier(len(calls))
    outcomes: list[object] = [None] * len(calls)
    errors: list[BaseException] = []

    def worker(number: int, call: Callable[[], object]) -> None:
        try:
            with scope(study=study) if study is not None else contextlib.nullcontext():
                barrier.wait()
                outcomes[number] = call()
        except expected as exc:
            outcomes[number] = exc
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(number, call)) for number, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return outcomes
