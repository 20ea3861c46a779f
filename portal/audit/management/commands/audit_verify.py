from django.core.management.base import BaseCommand, CommandError

from portal.audit.services import verify_chain


class Command(BaseCommand):
    help = "Walk the audit hash chain and name the first broken link."

    def handle(self, *args, **options):
        count, broken = verify_chain()
        if broken:
            raise CommandError(f"{broken} ({count} events before it are intact)")
        self.stdout.write(f"audit chain intact: {count} events")
