"""Queue face detection for the episodes of a study that lack the current detector's: episodes verified before
faces were detected, and every episode again after a detector upgrade (a new detector_id)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django_scopes import scope

from portal.faces.services import detection
from portal.studies.models import Study


class Command(BaseCommand):
    help = "Queue face detection by the current detector for a study's exported episodes."

    def add_arguments(self, parser):
        parser.add_argument("study", nargs="+", help="Study code(s).")
        parser.add_argument("--again", action="store_true", help="Also run again where it is done or failed.")

    def handle(self, *args, study: list[str], again: bool = False, **options):
        for code in study:
            found = Study.objects.filter(code=code).first()
            if found is None:
                raise CommandError(f"no study with the code {code!r}")
            if found.face_policy == Study.FacePolicy.OFF:
                self.stdout.write(f"{code}: face policy off, nothing queued")
                continue
            with scope(study=found):
                queued = detection.queue_study(None, found, again=again)
            self.stdout.write(f"{code}: {queued} episode(s) queued for {detection.current_detector_id()}")
