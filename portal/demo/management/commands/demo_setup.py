"""Create a demo study with one user per role and print their logins (idempotent)."""

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from portal.access.models import Role
from portal.access.services import grant_role
from portal.accounts import services as accounts
from portal.research.services.access import grant_access, request_access
from portal.studies.models import Study
from portal.studies.services.study import create_study, current_data_use_agreement, publish_data_use_agreement

DEMO_STUDY = "demo"
# Demo accounts for a local machine only; `make run` prints them.
DEMO_USERS = [
    ("coordinator", "ceres-demo-coordinator", [Role.COORDINATOR]),
    ("ethics1", "ceres-demo-ethics1", [Role.ETHICS_OFFICER]),
    ("ethics2", "ceres-demo-ethics2", [Role.ETHICS_OFFICER]),
    ("researcher", "ceres-demo-researcher", [Role.RESEARCHER]),
]
DEMO_ADMIN = ("admin", "ceres-demo-admin")
# Signed in but without a role: asks for researcher access, to try the whole researcher journey.
DEMO_APPLICANT = ("applicant", "ceres-demo-applicant")
DEMO_AGREEMENT = (
    "CERES demo study: data-use agreement.\n\n"
    "1. Use the released episodes only to train and evaluate robot manipulation policies.\n"
    "2. Do not try to identify any demonstrator, and do not link the data with other data to do so.\n"
    "3. Keep the data on systems only your project's members can reach; do not pass it on.\n"
    "4. When the portal tells you an episode was withdrawn, delete every copy of it within 30 days.\n"
    "5. Cite the study's project identifier in any publication that uses the data."
)

DEMO_EMAIL_DOMAIN = "demo.ceres.invalid"


def demo_email(username: str) -> str:
    return f"{username}@{DEMO_EMAIL_DOMAIN}"


class Command(BaseCommand):
    help = "Create the demo study, one user per role and a site administrator; print the logins."

    @transaction.atomic
    def handle(self, *args, **options):
        User = get_user_model()
        actor = "demo_setup"
        study = Study.objects.filter(code=DEMO_STUDY).first() or create_study(
            actor, code=DEMO_STUDY, title="Demo: kitchen pick-and-place", project_id="CERES-DEMO-01",
            status=Study.Status.ACTIVE, audio_policy=Study.AudioPolicy.DISCARD,
        )
        admin_name, admin_password = DEMO_ADMIN
        if not User.objects.filter(username=admin_name).exists():
            User.objects.create_superuser(admin_name, password=admin_password)
        agreement = current_data_use_agreement(study) or publish_data_use_agreement(
            User.objects.get(username=admin_name), study, text=DEMO_AGREEMENT)
        lines = [f"  {'site admin':<18} {admin_name:<12} {admin_password}"]
        applicant, applicant_password = DEMO_APPLICANT
        for username, password in [*((name, password) for name, password, _ in DEMO_USERS),
                                   (applicant, applicant_password)]:
            if not User.objects.filter(username=username).exists():
                User.objects.create_user(username, password=password)
        # Confirmed addresses (the .invalid domain never resolves), before any grant or request tells anyone
        # anything: the demo's mail is printed to the log. An address someone changed on their account page is left
        # as it is.
        for user in User.objects.filter(username__in=[admin_name, applicant, *(name for name, _, _ in DEMO_USERS)],
                                        email=""):
            accounts.set_confirmed_email(actor, user, demo_email(user.username))
        for username, password, roles in DEMO_USERS:
            user = User.objects.get(username=username)
            for role in roles:
                if user.role_grants.filter(study=study, role=role).exists():
                    continue
                if role == Role.RESEARCHER:  # as a researcher gets it: asked, agreement accepted, granted
                    coordinator = User.objects.get(username="coordinator")
                    asked = request_access(user, study, purpose="Try the demo's released episodes.",
                                           version=agreement.version, sha256=agreement.sha256)
                    grant_access(coordinator, asked, expires_at=timezone.now() + timedelta(days=365))
                else:
                    grant_role(actor, user, study, role)
            lines.append(f"  {Role(roles[0]).label:<18} {username:<12} {password}")
        lines.append(f"  {'(no role yet)':<18} {applicant:<12} {applicant_password}")
        self.stdout.write(f"Demo study '{study.code}' ready. Logins (role, username, password):")
        self.stdout.write("\n".join(lines))
        self.stdout.write(self._second_factor(actor, User))

    def _second_factor(self, actor: str, User) -> str:
        if not settings.CERES_REQUIRE_2FA:
            return ("Second factor: off (CERES_REQUIRE_2FA is not set); any user may still set one up under their "
                    "account page.")
        lines = ["Second factor: on (CERES_REQUIRE_2FA=1). TOTP secrets of the demo accounts that need one "
                 "(add them to an authenticator app):"]
        for user in User.objects.filter(username__in=["admin", "ethics1", "ethics2"]).order_by("username"):
            if accounts.second_factor_required_by_rule(user):
                device = accounts.confirmed_device(user) or accounts.provision_second_factor(actor, user)
                lines.append(f"  {user.username:<12} {accounts.totp_secret(device)}")
        return "\n".join(lines)
