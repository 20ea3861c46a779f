"""A skipped test is a failure where every service is up (CI: ``infra/test.sh`` sets ``CERES_FAIL_ON_SKIP=1``).

On the embedded defaults (no ``DATABASE_URL``, no Redis, no S3 gateway, no Chromium) the tests that need
those parts skip, and that is expected. Where ``infra/test.sh`` has brought every part up, a skip means the
environment is wrong (a service down, a variable lost), and the run would be green while testing less:
so every skip outside ``ALLOWED_SKIPS`` turns a passing run into a failing one, listed with its reason.
"""

from __future__ import annotations

import os

import pytest

# node id (or the start of one, ending in "::" or "[") -> why it may skip even with every service up.
# Keep it short: an entry is a test that CI does not run. Empty: with PostgreSQL, Redis, the S3 gateway
# and Chromium up, every test of the suite runs.
ALLOWED_SKIPS: dict[str, str] = {}


def is_allowed(nodeid: str, allowed: dict[str, str]) -> bool:
    return any(nodeid == entry or (entry.endswith(("::", "[")) and nodeid.startswith(entry)) for entry in allowed)


class SkipPolicy:
    """Collects skips (tests and whole modules, xfails aside) and fails a passing session on any outside
    the allow-list."""

    def __init__(self, allowed: dict[str, str]):
        self.allowed = allowed
        self.unexpected: list[tuple[str, str]] = []

    def _note(self, report) -> None:
        if report.skipped and not hasattr(report, "wasxfail") and not is_allowed(report.nodeid, self.allowed):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.unexpected.append((report.nodeid, reason))

    def pytest_runtest_logreport(self, report) -> None:
        self._note(report)

    def pytest_collectreport(self, report) -> None:
        self._note(report)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.unexpected:
            terminalreporter.section("skips not on the allow-list (tests/skip_policy.py)", red=True)
            for nodeid, reason in self.unexpected:
                terminalreporter.line(f"{nodeid}: {reason}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session) -> None:
        if self.unexpected and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def configure(config: pytest.Config, allowed: dict[str, str] = ALLOWED_SKIPS) -> None:
    """Register the policy when ``CERES_FAIL_ON_SKIP=1`` (called from ``tests/conftest.py``)."""
    if os.environ.get("CERES_FAIL_ON_SKIP") == "1":
        config.pluginmanager.register(SkipPolicy(allowed), "ceres-skip-policy")
