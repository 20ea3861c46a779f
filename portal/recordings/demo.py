"""The demo study's registry, and the study block of captures that match it.

``demo_recordings`` and ``demo_capture`` both use this; the study block itself is built by
``exporter.generate.study_block``, like ``python -m exporter generate --headset-id ...`` does.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone
from django_scopes import scope

from exporter.generate import study_block
from portal.studies.models import ConsentDocument, ConsentEvent, Demonstrator, Headset, Study
from portal.studies.services.consent import (
    accept_consent_document,
    consent_coverage,
    give_consent,
    upload_consent_document,
)
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.headsets import register_headset

STUDY_CODE = "demo"
HEADSET_ID = "DEMO-HS-01"
# Fixed, so the generate line in the README matches every demo database; the family pair is that of HEADSET_ID.
DESIGNATOR = "easy-cedar-otter-oak"
DOCUMENT = ("ICF-DEMO", "1")
CONSENT_TEXT = b"Demo consent form: I agree that my hand movements and the headset camera view are recorded.\n"
CONSENT_AGE_DAYS = 7


class DemoMissing(Exception):
    """The demo study or its users do not exist yet; the message says what to run."""


@dataclass(frozen=True)
class DemoRegistry:
    study: Study
    coordinator: object
    headset: Headset
    demonstrator: Demonstrator
    consent: ConsentEvent | None
    # The demonstrator's withdrawal, when they withdrew: then there is no consent, and none is given again (a
    # consent dated before the withdrawal cannot be recorded, and seeding must not undo a withdrawal).
    withdrawal: ConsentEvent | None = None

    @property
    def withdrawn(self) -> str | None:
        """Why captures can no longer be made for the demo demonstrator, or None while they can."""
        if self.withdrawal is None:
            return None
        return f"demonstrator {self.demonstrator.designator} withdrew consent on {self.withdrawal.event_date}"

    def study_block(self, **overrides) -> dict:
        """What a recorder of this study writes into capture.json, optionally with claims changed."""
        if self.consent is None:
            raise DemoMissing(f"no capture can be made for the demo study: {self.withdrawn}")
        document = self.consent.document
        claims = {
            "headset_id": self.headset.headset_id,
            "demonstrator_id": self.demonstrator.designator,
            "project_id": self.study.project_id or None,
            "consent_date": self.consent.event_date,
            "consent_document_id": f"{document.identifier} v{document.version}",
        }
        return study_block(**{**claims, **overrides})


def demo_registry() -> DemoRegistry:
    """The demo study's headset, demonstrator and accepted consent, registered through the services if missing.

    Safe to call again: what exists is reused. After the demonstrator withdrew, consent is not given again: the
    registry comes back without one and says why (``DemoRegistry.withdrawn``).
    """
    User = get_user_model()
    study = Study.objects.filter(code=STUDY_CODE).first()
    coordinator = User.objects.filter(username="coordinator").first()
    ethics = User.objects.filter(username="ethics1").first()
    if study is None or coordinator is None or ethics is None:
        raise DemoMissing("run `python manage.py demo_setup` first")
    today = timezone.localdate()
    with scope(study=study):
        headset = Headset.objects.filter(headset_id=HEADSET_ID).first() or register_headset(
            coordinator, study, headset_id=HEADSET_ID, model="demo headset",
            assigned_on=today - timedelta(days=CONSENT_AGE_DAYS))
        demonstrator = Demonstrator.objects.filter(designator=DESIGNATOR).first() or create_demonstrator(
            coordinator, study, designator=DESIGNATOR, headset=headset)
        identifier, version = DOCUMENT
        document = ConsentDocument.objects.filter(identifier=identifier, version=version).first()
        if document is None:
            document = upload_consent_document(
                coordinator, study, identifier=identifier, version=version, uploaded_file=io.BytesIO(CONSENT_TEXT),
                issued_on=today - timedelta(days=30))
        if not document.is_accepted:
            accept_consent_document(ethics, document)
        coverage = consent_coverage(demonstrator, today, ConsentEvent.Scope.EPISODE_RELEASE)
        withdrawal = ConsentEvent.objects.filter(
            demonstrator=demonstrator, kind=ConsentEvent.Kind.WITHDRAWN).order_by("event_date", "pk").last()
        if coverage.covered:
            consent = coverage.event
        elif withdrawal is not None:
            consent = None
        else:
            consent = give_consent(
                coordinator, demonstrator, document=document, consent_date=today - timedelta(days=CONSENT_AGE_DAYS),
                scopes=[ConsentEvent.Scope.EPISODE_RELEASE, ConsentEvent.Scope.RAW_AUDIO_RETENTION])
    return DemoRegistry(study=study, coordinator=coordinator, headset=headset, demonstrator=demonstrator,
                        consent=consent, withdrawal=None if coverage.covered else withdrawal)
