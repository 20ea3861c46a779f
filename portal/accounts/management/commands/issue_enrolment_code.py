"""Issue a second-factor enrolment code from the command line (e.g. for the first site administrator)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from portal.accounts import services
from portal.core.errors import command_refusals


class Command(BaseCommand):
    help = ("Issue a one-time code with which USERNAME sets up their second factor (needed under CERES_REQUIRE_2FA "
            "by ethics officers and site administrators who have none). Audited; the code is printed once.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--hours", type=int, help="hours until it expires (default and most: "
                                                      "CERES_ENROLMENT_CODE_HOURS)")

    def handle(self, *args, username: str, hours: int | None = None, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        with command_refusals():
            row, code = services.issue_enrolment_code("manage.py issue_enrolment_code", user, hours=hours)
        self.stdout.write(f"{username}: enrolment code {code} (valid until {row.expires_at:%Y-%m-%d %H:%M} UTC, "
                          "once)")
