"""Lift a login lockout from the command line (e.g. the only site administrator locked out)."""

from django.core.management.base import BaseCommand

from portal.accounts import services
from portal.core.errors import command_refusals


class Command(BaseCommand):
    help = "Clear the failed logins of a username or an address, so that it can sign in again (audited)."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--username")
        which.add_argument("--address", help="the client address that was locked out")

    def handle(self, *args, username=None, address=None, **options):
        with command_refusals():
            cleared = services.unlock("manage.py unlock_login", username=username, ip_address=address)
        self.stdout.write(f"{username or address}: {cleared} failed attempt record(s) cleared; it can sign in again.")
