"""Seed a study the size of a year's work (for benchmarks and drills, never a production database)."""

from __future__ import annotations

import secrets
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from portal.demo.seeding import SeedRefused, seed_study

SEEDED_TABLES = ["audit_auditevent", "recordings_recording", "recordings_episode", "recordings_recordinglog",
                 "recordings_verification", "studies_demonstrator", "studies_headset", "studies_consentevent",
                 "releases_releaserequest", "releases_releaseitem", "releases_approval", "releases_release",
                 "research_issuedlink", "research_accessrequest"]


class Command(BaseCommand):
    help = ("Create a study with N recordings in realistic states (those past export with their episode), its "
            "registry and exactly M new audit events, through the models in bulk. Synthetic data that the "
            "append-only audit log keeps forever: run it on a database of its own. Refuses if the study exists.")

    def add_arguments(self, parser):
        parser.add_argument("--study", default="scale", help="code of the new study (default: scale)")
        parser.add_argument("--episodes", type=int, default=100_000, help="recordings to seed (default 100 000)")
        parser.add_argument("--audit-events", type=int, default=1_000_000,
                            help="audit events to append in all, the recordings' own included (default 1 000 000)")
        parser.add_argument("--headsets", type=int, default=500)
        parser.add_argument("--demonstrators", type=int, default=2000)
        parser.add_argument("--release-requests", type=int, default=0,
                            help="release requests of the verified episodes (drafts, awaiting approval, rejected)")
        parser.add_argument("--released", type=int, default=0,
                            help="published releases of verified episodes, for researchers to browse")
        parser.add_argument("--links", type=int, default=0, help="download links issued to the study's researcher")
        parser.add_argument("--access-requests", type=int, default=0,
                            help="researchers waiting for a decision on their access request")
        parser.add_argument("--password", help="password of the study's three users (default: a random one, printed)")
        parser.add_argument("--seed", type=int, default=1, help="random seed: the same numbers give the same data")

    def handle(self, *args, **options):
        password = options["password"] or secrets.token_urlsafe(12)
        started = time.monotonic()
        try:
            report = seed_study(options["study"], episodes=options["episodes"],
                                audit_events=options["audit_events"], headsets=options["headsets"],
                                demonstrators=options["demonstrators"], release_requests=options["release_requests"],
                                released=options["released"], links=options["links"],
                                access_requests=options["access_requests"], password=password, seed=options["seed"])
        except SeedRefused as exc:
            raise CommandError(str(exc)) from None
        if connection.vendor == "postgresql" and connection.get_autocommit():
            # Index-only scans (counts) need the visibility map that VACUUM writes.
            with connection.cursor() as cursor:
                for table in SEEDED_TABLES:
                    cursor.execute(f"VACUUM (ANALYZE) {table}")
        self.stdout.write(
            f"study {report.study.code}: {report.recordings} recordings, {report.episodes} episodes, "
            f"{report.release_requests} release requests, {report.audit_events} audit events "
            f"in {time.monotonic() - started:.0f} s")
        self.stdout.write("logins (password " + ("as given" if options["password"] else password) + "): "
                          + ", ".join(f"{role} {username}" for role, username in report.logins.items()))
