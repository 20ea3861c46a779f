from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django_scopes import scope

from portal.recordings.services.ingest import ingest_path
from portal.studies.models import Study


class Command(BaseCommand):
    help = "Ingest capture sources (folders or ZIP archives) into a study; exports are queued for the worker."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--study", required=True, help="study code")
        parser.add_argument("--user", help="the coordinator recorded as having ingested them")

    def handle(self, *args, paths, study, user, **options):
        target = Study.objects.filter(code=study).first()
        if target is None:
            raise CommandError(f"no study with code {study!r}")
        actor = None
        if user:
            actor = get_user_model().objects.filter(username=user).first()
            if actor is None:
                raise CommandError(f"no user {user!r}")
        missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
        if missing:
            raise CommandError(f"no such file or folder: {', '.join(missing)}")
        failures = 0
        with scope(study=target):
            for path in paths:
                recording = ingest_path(actor, target, path, via="command")
                line = f"{path}: {recording.state} (recording {recording.uid})"
                if recording.reason:
                    line += f": {recording.reason}"
                if recording.state in ("rejected", "quarantined"):
                    failures += 1
                    self.stderr.write(line)
                else:
                    self.stdout.write(line)
        if failures:
            raise CommandError(f"{failures} of {len(paths)} capture sources were not accepted")
