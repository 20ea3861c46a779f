"""A generated capture passes ingest in the demo study on the first try: from `python -m exporter generate`
with the study options, and from `manage.py demo_capture`. Both used to be quarantined (no study block, and
a recording date fixed before any consent)."""

import io
import json
import shlex
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django_scopes import scope

from exporter.cli import main as exporter_main
from portal.recordings.demo import demo_registry
from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path


def manifest(archive: Path) -> dict:
    with zipfile.ZipFile(archive) as bundle:
        return json.loads(bundle.read(f"{archive.stem}/capture.json"))


def ingest(demo, archive: Path) -> Recording:
    with scope(study=demo):
        return ingest_path(demo_registry().coordinator, demo, archive)


def test_exporter_generate_with_the_study_options_makes_a_capture_the_demo_study_accepts(demo, tmp_path, capsys):
    claims = demo_registry().study_block()
    before = datetime.now(UTC).replace(microsecond=0)
    argv = ["generate", str(tmp_path / "cli-capture"), "--zip", "--seconds", "3", "--rate-hz", "15",
            "--width", "64", "--height", "48"]
    for key, value in claims.items():
        argv += [f"--{key.replace('_', '-')}", value]
    assert exporter_main(argv) == 0
    archive = Path(capsys.readouterr().out.strip())

    written = manifest(archive)
    assert written["study"] == claims
    recorded_at = datetime.fromisoformat(written["recorded_at"])
    assert before <= recorded_at <= datetime.now(UTC), "the recording time defaults to now"
    recording = ingest(demo, archive)
    assert (recording.state, recording.reason) == (Recording.State.QUEUED, "")


def test_generate_names_a_bad_study_option_or_time(tmp_path, capsys):
    with pytest.raises(SystemExit) as bad_date:
        exporter_main(["generate", str(tmp_path / "x"), "--consent-date", "23/11/2026"])
    assert bad_date.value.code == 2
    assert "--consent-date: '23/11/2026' is not a date YYYY-MM-DD" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        exporter_main(["generate", str(tmp_path / "x"), "--recorded-at", "2026-11-30T10:00:00"])
    assert "has no time zone" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_recorded_at_option_is_written_as_given(tmp_path, capsys):
    assert exporter_main(["generate", str(tmp_path / "dated"), "--seconds", "2", "--camera", "none",
                          "--recorded-at", "2026-05-04T11:30:00+02:00"]) == 0
    written = json.loads((tmp_path / "dated" / "capture.json").read_text())
    assert written["recorded_at"] == "2026-05-04T09:30:00.000000Z"
    assert written["study"] is None, "no study option, no study block"


def test_demo_capture_writes_a_zip_that_is_accepted_and_prints_the_same_generate_line(demo, tmp_path):
    out = io.StringIO()
    call_command("demo_capture", str(tmp_path / "upload-me.zip"), "--seconds", "3", stdout=out)
    archive = tmp_path / "upload-me.zip"
    claims = demo_registry().study_block()
    assert manifest(archive)["study"] == claims
    assert datetime.now(UTC) - datetime.fromisoformat(manifest(archive)["recorded_at"]) < timedelta(minutes=5)

    recording = ingest(demo, archive)
    assert (recording.state, recording.reason) == (Recording.State.QUEUED, "")
    with scope(study=demo):
        assert recording.demonstrator.designator == claims["demonstrator_id"]

    line = shlex.split(out.getvalue().splitlines()[-1])
    assert line[:4] == ["python", "-m", "exporter", "generate"]
    assert {line[i]: line[i + 1] for i in range(5, len(line) - 1) if line[i].startswith("--") and
            line[i + 1][:2] != "--"}.items() >= {f"--{k.replace('_', '-')}": v for k, v in claims.items()}.items()


def test_demo_registry_is_reused_when_run_again(demo):
    first, again = demo_registry(), demo_registry()
    assert (first.headset.pk, first.demonstrator.pk, first.consent.pk) == \
        (again.headset.pk, again.demonstrator.pk, again.consent.pk)


def test_demo_capture_under_another_data_dir_names_the_missing_database_and_leaves_no_file(tmp_path):
    import os
    import subprocess
    import sys

    other = tmp_path / "other-data"
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}  # the embedded SQLite
    env["CERES_DATA_DIR"] = str(other)
    result = subprocess.run([sys.executable, "manage.py", "demo_capture", str(tmp_path / "capture.zip")],
                            cwd=Path(__file__).resolve().parents[3], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert f"no portal database at {other / 'portal.sqlite3'}" in result.stderr
    assert "manage.py migrate" in result.stderr
    assert not (other / "portal.sqlite3").exists()
    assert not (tmp_path / "capture.zip").exists()
