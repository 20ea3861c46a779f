"""Generate and ingest demo recordings for the demo study (run ``demo_setup`` first). Safe to run again."""

from __future__ import annotations

import io
import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django_scopes import scope

from exporter.generate import generate_capture
from portal.recordings.models import Recording
from portal.recordings.services.ingest import ingest_path
from portal.studies.models import ConsentDocument, Demonstrator, Headset, Study
from portal.studies.services.consent import accept_consent_document, give_consent, is_covered, upload_consent_document
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.headsets import register_headset

HEADSET_ID = "DEMO-HS-01"
DOCUMENT = ("ICF-DEMO", "1")
CONSENT_TEXT = b"Demo consent form: I agree that my hand movements and the headset camera view are recorded.\n"


class Command(BaseCommand):
    help = ("Register a headset, a demonstrator and an accepted consent in the demo study, then ingest three "
            "generated recordings: two that export, one quarantined (an unregistered headset).")

    def handle(self, *args, **options):
        User = get_user_model()
        study = Study.objects.filter(code="demo").first()
        coordinator = User.objects.filter(username="coordinator").first()
        ethics = User.objects.filter(username="ethics1").first()
        if study is None or coordinator is None or ethics is None:
            raise CommandError("run `python manage.py demo_setup` first")
        with scope(study=study):
            demonstrator = self._registry(study, coordinator, ethics)
            claims = {"headset_id": HEADSET_ID, "demonstrator_id": demonstrator.designator,
                      "project_id": study.project_id}
            plans = [
                ("demo-kitchen-0001", claims, {"microphone": "track"}),
                ("demo-kitchen-0002", claims, {"aligned": False}),
                ("demo-kitchen-0003", {**claims, "headset_id": "DEMO-HS-99"}, {}),
            ]
            with tempfile.TemporaryDirectory(prefix="ceres-demo-") as scratch:
                for number, (capture_id, study_claims, options) in enumerate(plans, start=1):
                    if Recording.objects.filter(capture_id=capture_id).exists():
                        self.stdout.write(f"{capture_id}: already ingested")
                        continue
                    source = generate_capture(
                        Path(scratch) / capture_id, seconds=6.0, rate_hz=15, seed=number, capture_id=capture_id,
                        study=study_claims, recorded_at=datetime.now(UTC).replace(microsecond=0) - timedelta(days=1),
                        **options)
                    recording = ingest_path(coordinator, study, source, via="command")
                    self.stdout.write(f"{capture_id}: {recording.state}"
                                      + (f" ({recording.reason})" if recording.reason else ""))
        self.stdout.write("Exports run in the Celery worker (`celery -A portal worker`).")

    def _registry(self, study: Study, coordinator, ethics) -> Demonstrator:
        headset = Headset.objects.filter(headset_id=HEADSET_ID).first() or register_headset(
            coordinator, study, headset_id=HEADSET_ID, model="demo headset")
        demonstrator = Demonstrator.objects.filter(headset=headset).first()
        if demonstrator is None:
            demonstrator = create_demonstrator(coordinator, study, headset=headset)
        identifier, version = DOCUMENT
        document = ConsentDocument.objects.filter(identifier=identifier, version=version).first()
        if document is None:
            document = upload_consent_document(
                coordinator, study, identifier=identifier, version=version, uploaded_file=io.BytesIO(CONSENT_TEXT),
                issued_on=date.today() - timedelta(days=30))
        if not document.is_accepted:
            accept_consent_document(ethics, document)
        if not is_covered(demonstrator, date.today() - timedelta(days=1), "episode_release"):
            give_consent(coordinator, demonstrator, document=document,
                                  consent_date=date.today() - timedelta(days=7),
                                  scopes=["episode_release", "raw_audio_retention"])
        return demonstrator
