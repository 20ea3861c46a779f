"""Coordinator journey through the recording pipeline, with a real Celery worker behind the live server."""

from __future__ import annotations

import io
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django_scopes import scope

from exporter.generate import generate_capture
from portal.studies.models import Demonstrator

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def capture_zip(folder: Path, claims: dict, seed: int) -> Path:
    source = generate_capture(folder / f"upload-{seed}", seconds=4.0, rate_hz=15, seed=seed, width=160, height=120,
                              capture_id=f"browser-upload-{seed}", study=claims,
                              recorded_at=datetime.now(UTC).replace(microsecond=0) - timedelta(days=1))
    return Path(shutil.make_archive(str(source), "zip", root_dir=source.parent, base_dir=source.name))


def upload(page, archive: Path) -> None:
    page.goto("/studies/demo/recordings/")
    page.set_input_files("#id_source", str(archive))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/studies/demo/recordings/*-*-*-*-*/")


@pytest.mark.django_db(transaction=True)
def test_coordinator_uploads_watches_export_and_sees_quarantine(demo, pipeline_worker, page, login, shot, tmp_path):
    call_command("demo_recordings", stdout=io.StringIO())
    with scope(study=demo):
        designator = Demonstrator.objects.get(headset__headset_id="DEMO-HS-01").designator
    claims = {"headset_id": "DEMO-HS-01", "demonstrator_id": designator, "project_id": demo.project_id}

    login(page, "coordinator", "ceres-demo-coordinator")
    upload(page, capture_zip(tmp_path, claims, seed=41))
    page.locator("#state .status", has_text="Verified").wait_for(timeout=120_000)
    assert page.locator("#receipt-status").inner_text() == "Verified"
    assert page.locator("#shard-files", has_text="meta/info.json").count() == 1
    assert page.locator("#shard-files", has_text="videos/observation.images.").count() == 1
    assert "exported as episode-" in page.locator("#log").inner_text()
    shot(page, "recording-verified")

    upload(page, capture_zip(tmp_path, {**claims, "headset_id": "HS-UNKNOWN"}, seed=42))
    page.locator("#state .status", has_text="Quarantined").wait_for(timeout=60_000)
    assert "headset 'HS-UNKNOWN' is not registered in study demo" in page.locator("#reason").inner_text()
    shot(page, "recording-quarantined")

    page.goto("/studies/demo/recordings/?state=quarantined")
    assert page.locator("#recordings tbody tr").count() == 2  # the demo's own and this upload
    shot(page, "recordings-quarantined-filter")
    page.goto("/studies/demo/recordings/")
    shot(page, "recordings-list")
    page.goto("/studies/demo/recordings/episodes/")
    page.locator("#episodes .status", has_text="Verified").first.wait_for(timeout=60_000)
    shot(page, "episodes")
