"""Browser tests: Playwright driving Debian's Chromium, headless, against pytest-django's live server."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls made by fixtures and by
# the live server's test data set-up are still synchronous, so allow them.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CERES_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(f"Chromium not found at {CHROMIUM} (bash infra/browser.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 860})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def login():
    def do_login(page, username: str, password: str) -> None:
        page.goto("/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")

    return do_login


@pytest.fixture
def shot(test_output):
    folder = test_output / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def pipeline_worker(settings, tmp_path, monkeypatch):
    """A real Celery worker on its own queue (Redis broker, the test's PostgreSQL database, storage and keys);
    the live server's task sends are routed to it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "portal" / "recordings"))
    from pipeline_worker import Worker, worker_env

    from portal.core import queue

    worker = Worker(env=worker_env(settings, tmp_path / "data", f"ceres-e2e-{uuid.uuid4().hex[:12]}"),
                    log=tmp_path / "worker.log")
    monkeypatch.setattr(queue, "send", worker.send)
    worker.start()
    try:
        yield worker
    finally:
        worker.kill()
