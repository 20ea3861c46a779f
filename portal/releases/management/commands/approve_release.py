"""Approve a release request as an ethics officer, through the same service as the page and the API."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django_scopes import scope

from portal.core.errors import command_refusals
from portal.releases.models import ReleaseRequest
from portal.releases.services import approval
from portal.studies.models import Study


class Command(BaseCommand):
    help = ("Approve release request NUMBER of study STUDY as USER (an ethics officer of the study, never its "
            "requester), for the manifest digest shown on its page.")

    def add_arguments(self, parser):
        parser.add_argument("study", help="study code")
        parser.add_argument("number", type=int, help="the request's number (release-NNNN)")
        parser.add_argument("--user", required=True, help="the approving ethics officer's username")
        parser.add_argument("--manifest-sha256", required=True, help="the manifest digest you reviewed")
        parser.add_argument("--code", default="", help="a code from the officer's authenticator, when the study "
                                                       "asks for a second factor")

    def handle(self, *args, study, number, user, manifest_sha256, code, **options):
        found = Study.objects.filter(code=study).first()
        if found is None:
            raise CommandError(f"no study {study!r}")
        officer = get_user_model().objects.filter(username=user, is_active=True).first()
        if officer is None:
            raise CommandError(f"no active user {user!r}")
        with scope(study=found):
            release = ReleaseRequest.objects.select_related("study").filter(number=number).first()
            if release is None:
                raise CommandError(f"study {study} has no release request {number}")
            with command_refusals():
                approval.approve(officer, release, manifest_sha256=manifest_sha256,
                                 second_factor=approval.SecondFactor(code=code))
            release.refresh_from_db()
        self.stdout.write(f"{release.release_id} approved by {user}; it is now "
                          f"{release.get_state_display().lower()}")
