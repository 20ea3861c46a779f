"""The mutation list stays runnable as the code moves on: each mutant finds its text exactly once and names
test files that exist (``run.py`` itself runs outside the suite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation.mutants import MUTANTS

REPO = Path(__file__).resolve().parents[2]


def test_mutant_ids_are_unique():
    ids = [mutant.id for mutant in MUTANTS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda mutant: mutant.id)
def test_each_mutant_applies_once_and_names_existing_tests(mutant):
    text = (REPO / mutant.path).read_text(encoding="utf-8")
    assert text.count(mutant.original) == 1, f"{mutant.path} no longer holds the text of {mutant.id} exactly once"
    assert mutant.mutated != mutant.original
    assert mutant.tests and all((REPO / test).is_file() for test in mutant.tests)
