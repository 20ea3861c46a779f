"""Generate and ingest demo recordings for the demo study (run ``demo_setup`` first). Safe to run again."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django_scopes import scope

from exporter.generate import generate_capture
from portal.recordings.demo import DemoMissing, demo_registry
from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path


class Command(BaseCommand):
    help = ("Register a headset, a demonstrator and an accepted consent in the demo study, then ingest four "
            "generated recordings: three that export (a release request's worth), one quarantined (an unregistered "
            "headset).")

    def handle(self, *args, **options):
        try:
            demo = demo_registry()
        except DemoMissing as exc:
            raise CommandError(str(exc)) from None
        study = demo.study
        plans = [
            ("demo-kitchen-0001", {}, {"microphone": "track"}),
            ("demo-kitchen-0002", {}, {"aligned": False}),
            ("demo-kitchen-0003", {"headset_id": "DEMO-HS-99"}, {}),
            ("demo-kitchen-0004", {}, {"retries": 2}),
        ]
        if demo.withdrawn:
            self.stdout.write(f"The demo {demo.withdrawn}: recordings not ingested yet are skipped (they would "
                              "not be covered), the others stay as they are.")
        recorded_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
        with scope(study=study), tempfile.TemporaryDirectory(prefix="ceres-demo-") as scratch:
            for number, (capture_id, overrides, options) in enumerate(plans, start=1):
                if Recording.objects.filter(capture_id=capture_id).exists():
                    self.stdout.write(f"{capture_id}: already ingested")
                    continue
                if demo.withdrawn:
                    self.stdout.write(f"{capture_id}: skipped ({demo.withdrawn})")
                    continue
                claims = demo.study_block(**overrides)
                source = generate_capture(Path(scratch) / capture_id, seconds=6.0, rate_hz=15, seed=number,
                                          capture_id=capture_id, study=claims, recorded_at=recorded_at, **options)
                recording = ingest_path(demo.coordinator, study, source, via="command")
                self.stdout.write(f"{capture_id}: {recording.state}"
                                  + (f" ({recording.reason})" if recording.reason else ""))
        self.stdout.write("Exports run in the Celery worker (`celery -A portal worker`).")
