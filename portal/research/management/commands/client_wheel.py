"""Build the researchers' client's wheel (clients/ceres-pull) into CERES_CLIENT_DIR, where /client/ serves it."""

from django.core.management.base import BaseCommand, CommandError

from portal.research.services import client


class Command(BaseCommand):
    help = ("Build the wheel of ceres-pull, the researchers' client, into CERES_CLIENT_DIR (served at /client/); "
            "only when a file of the client is newer than the wheel, unless --force.")

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="build it even when it is up to date")

    def handle(self, *args, force: bool = False, **options):
        try:
            path, built = client.build_wheel(force=force)
        except client.ClientError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{'built' if built else 'up to date'}: {path}")
