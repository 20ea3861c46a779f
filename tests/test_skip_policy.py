"""The CI skip policy (``tests/skip_policy.py``), run on a small suite of its own in a pytest subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SUITE = '''
import pytest

def test_passes():
    assert True

def test_needs_a_service():
    pytest.skip("needs the frobnicator: set FROB_URL")

@pytest.mark.parametrize("n", [1, 2])
def test_allowed(n):
    pytest.skip("not here")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert False
'''
CONFTEST = '''
from tests.skip_policy import configure

def pytest_configure(config):
    configure(config, allowed={"test_suite.py::test_allowed[": "skips everywhere, on purpose"})
'''


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    return tmp_path


def run(suite: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **env}
    environment.pop("CERES_FAIL_ON_SKIP", None)
    environment.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:django", "-p", "no:cacheprovider", "-rs",
                           *args], cwd=suite, env=environment, capture_output=True, text=True, timeout=120)


def test_a_skip_outside_the_allow_list_fails_a_passing_run(suite: Path):
    result = run(suite, CERES_FAIL_ON_SKIP="1")
    assert result.returncode == 1, result.stdout
    section = result.stdout.split("skips not on the allow-list (tests/skip_policy.py)", 1)[1]
    listed = [line for line in section.splitlines() if line.startswith("test_suite.py::")]
    assert listed == ["test_suite.py::test_needs_a_service: Skipped: needs the frobnicator: set FROB_URL"]
    assert "1 passed, 3 skipped, 1 xfailed" in result.stdout


def test_without_the_variable_skips_are_reported_but_pass(suite: Path):
    result = run(suite)
    assert result.returncode == 0, result.stdout
    assert "skips not on the allow-list" not in result.stdout
    assert "SKIPPED [1] test_suite.py:8: needs the frobnicator: set FROB_URL" in result.stdout


def test_only_allowed_skips_pass(suite: Path):
    result = run(suite, "-k", "not needs_a_service", CERES_FAIL_ON_SKIP="1")
    assert result.returncode == 0, result.stdout
    assert "skips not on the allow-list" not in result.stdout


def test_a_skipped_module_counts(suite: Path):
    (suite / "test_module.py").write_text('import pytest\npytest.skip("whole module", allow_module_level=True)\n')
    result = run(suite, "-k", "not needs_a_service", CERES_FAIL_ON_SKIP="1")
    assert result.returncode == 1, result.stdout
    section = result.stdout.split("skips not on the allow-list (tests/skip_policy.py)", 1)[1]
    assert [line for line in section.splitlines() if line.startswith("test_")] == [
        "test_module.py: Skipped: whole module"]


def test_a_failing_run_keeps_its_own_status(suite: Path):
    (suite / "test_fails.py").write_text("def test_fails():\n    assert 1 == 2\n")
    result = run(suite, CERES_FAIL_ON_SKIP="1")
    assert result.returncode == 1
    assert "1 failed, 1 passed, 3 skipped, 1 xfailed" in result.stdout
    usage = run(suite, "--no-such-option", CERES_FAIL_ON_SKIP="1")
    assert usage.returncode == 4
