"""Write a capture source ZIP that the demo study's registry accepts, ready to upload on the recordings page."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.urls import reverse

from exporter.generate import generate_capture
from portal.recordings.demo import DemoMissing, demo_registry


class Command(BaseCommand):
    help = ("Write a generated capture source (a ZIP) whose study block matches the demo study's registry: its "
            "headset, a demonstrator with consent covering the recording, recorded now. Registers what is missing.")

    def add_arguments(self, parser):
        parser.add_argument("out", nargs="?", type=Path,
                            help="the ZIP to write (default: demo-capture-<UTC time>.zip in the current folder)")
        parser.add_argument("--seconds", type=float, default=20.0, help="recording length (default 20)")
        parser.add_argument("--seed", type=int, default=0, help="random seed of the motion (default 0)")

    def handle(self, *args, out: Path | None, seconds: float, seed: int, **options):
        _require_demo_database()
        try:
            demo = demo_registry()
            study = demo.study_block()
        except DemoMissing as exc:
            raise CommandError(str(exc)) from None
        recorded_at = datetime.now(UTC).replace(microsecond=0)
        capture_id = f"demo-capture-{recorded_at:%Y%m%d-%H%M%S}"
        out = Path(out or f"{capture_id}.zip")
        folder = out.with_suffix("") if out.suffix == ".zip" else out
        try:
            archive = generate_capture(folder, seconds=seconds, rate_hz=30, seed=seed, capture_id=capture_id,
                                       study=study, recorded_at=recorded_at, zip_output=True)
        except (ValueError, FileExistsError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Wrote {archive}: headset {study['headset_id']}, demonstrator {study['demonstrator_id']}, "
                          f"consent of {study['consent_date']} ({study['consent_document_id']}), "
                          f"recorded at {recorded_at:%Y-%m-%dT%H:%M:%SZ}.")
        self.stdout.write(f"Upload it as the coordinator on {reverse('recording-list', args=[demo.study.code])}; "
                          "it is checked against the registry and exported by the Celery worker.")
        line = ["python", "-m", "exporter", "generate", str(folder), "--zip", "--seconds", f"{seconds:g}",
                "--seed", str(seed), "--capture-id", capture_id]
        for key, value in study.items():
            if value is not None:
                line += [f"--{key.replace('_', '-')}", value]
        self.stdout.write("The same capture from the exporter's command line (recorded now):\n  " + shlex.join(line))


def _require_demo_database() -> None:
    """Refuse, naming the database, when it is not the demo's: a SQLite file that does not exist (opening it would
    leave an empty file behind, e.g. under another CERES_DATA_DIR) or a database without the portal's tables."""
    hint = "run `manage.py migrate` and `manage.py demo_setup` with the same settings first"
    if connection.vendor == "sqlite" and not connection.is_in_memory_db():
        name = Path(str(connection.settings_dict["NAME"]))
        if not name.is_file():
            raise CommandError(f"no portal database at {name} (CERES_DATA_DIR={settings.DATA_DIR}): {hint}")
    try:
        tables = set(connection.introspection.table_names())
    except DatabaseError as exc:
        raise CommandError(f"cannot open the portal database: {exc}") from None
    if "studies_study" not in tables:
        raise CommandError(f"the portal database has no tables yet: {hint}")
