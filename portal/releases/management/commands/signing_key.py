"""Print the public half of the release signing key (what /.well-known/ceres-release-key serves)."""

import base64

from django.core.management.base import BaseCommand

from exporter.release import public_key_raw
from portal.core import signing


class Command(BaseCommand):
    help = ("Print the Ed25519 public key that verifies release manifests: PEM, base64 of the raw 32 bytes, "
            "and its fingerprint (SHA-256 of the raw key).")

    def handle(self, *args, **options):
        public = signing.public_key()
        self.stdout.write(signing.public_key_pem().rstrip())
        self.stdout.write(f"base64: {base64.b64encode(public_key_raw(public)).decode()}")
        self.stdout.write(f"fingerprint: {signing.key_fingerprint()}")
