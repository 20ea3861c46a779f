"""Run a fixity pass now, through the same service as the schedule (ops)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django_scopes import scopes_disabled

from portal.core.errors import command_refusals
from portal.core.storage import is_transient
from portal.fixity.services import runs
from portal.studies.models import Study


class Command(BaseCommand):
    help = ("Check stored objects against their records now: the next slice of the schedule, or with --all the "
            "whole store (every shard, release and one-dataset download re-hashed, every folder listed for "
            "orphans). Problems are recorded and alerted as in a scheduled run. Exit 1 if any problem is found.")

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="check the whole store, not only the next slice")
        parser.add_argument("--study", action="append", default=[], metavar="CODE",
                            help="check only this study's folders (repeatable; with --all)")

    def handle(self, *args, **options):
        studies = None
        if options["study"]:
            if not options["all"]:
                raise CommandError("--study limits a full pass: give --all too")
            codes = sorted(set(options["study"]))
            studies = list(Study.objects.filter(code__in=codes))
            unknown = sorted(set(codes) - {study.code for study in studies})
            if unknown:
                raise CommandError(f"no study with the code {', '.join(unknown)}")
        with command_refusals():
            try:
                run = runs.run_fixity("command", full=options["all"], studies=studies)
            except Exception as exc:
                if is_transient(exc):
                    raise CommandError(f"the storage did not answer; the run stopped and is recorded: {exc}") from None
                raise
        self.stdout.write(f"fixity run {run.pk} ({run.scope_label}): {run.units_checked} records, "
                          f"{run.objects_listed} objects listed, {run.objects_checked} checked "
                          f"({run.bytes_checked} bytes) in {run.duration.total_seconds():.1f} s, "
                          f"{run.problem_count} problem{'s' if run.problem_count != 1 else ''}")
        with scopes_disabled():
            problems = list(run.problems.order_by("pk")[:50])
        for problem in problems:
            self.stdout.write(f"  {problem.kind}: {problem.storage}:{problem.object_name}: {problem.detail}")
        if run.problem_count > 50:
            self.stdout.write(f"  and {run.problem_count - 50} more (admin: Fixity problems)")
        if run.problem_count:
            raise SystemExit(1)
