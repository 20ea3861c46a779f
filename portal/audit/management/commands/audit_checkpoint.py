from django.core.management.base import BaseCommand

from portal.audit.services import write_checkpoint
from portal.core.errors import command_refusals


class Command(BaseCommand):
    help = ("Write a signed checkpoint of the audit chain's head to the releases storage now (beat does it every "
            "CERES_AUDIT_CHECKPOINT_MINUTES). Refused when the chain does not extend the newest checkpoint.")

    def add_arguments(self, parser):
        parser.add_argument("--restart", metavar="REASON", default="",
                            help="start the checkpoints afresh from the current chain (verified whole), e.g. after "
                                 "restoring the database from a backup or changing the signing key; recorded as "
                                 "an audit event with the reason")

    def handle(self, *args, **options):
        with command_refusals():
            checkpoint = write_checkpoint(restart=options["restart"].strip(), actor="manage.py audit_checkpoint")
        if checkpoint is None:
            self.stdout.write("the audit log has no event yet: no checkpoint written")
            return
        self.stdout.write(f"checkpoint of seq {checkpoint.seq} ({checkpoint.event_count} events) written to "
                          f"{checkpoint.name}")
