from django.core.management.base import BaseCommand, CommandError

from portal.audit.models import ChainVerification
from portal.audit.services import run_verification


class Command(BaseCommand):
    help = ("Walk the audit hash chain (links, seq, keyed hashes), compare its head with the newest signed checkpoint "
            "in the releases storage and name the first seq affected by a problem; exits non-zero on any problem. "
            "Recorded for the audit view.")

    def handle(self, *args, **options):
        report = run_verification(ChainVerification.Via.COMMAND)
        if not report.ok:
            raise CommandError(str(report))
        self.stdout.write(str(report))
