"""A demonstrator's history in the study's audit log, from consent to withdrawal (``audit.histories``): the
demonstrator's own events and those of each of its consent events (given, withdrawn)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import Q

from portal.audit import histories
from portal.studies.models import ConsentEvent, Demonstrator
from portal.studies.services.demonstrators import normalise_designator

DEMONSTRATOR, CONSENT_EVENT = "studies.demonstrator", "studies.consentevent"


def find_demonstrator(value: str) -> Demonstrator | None:
    """The study's demonstrator of the designator ``value`` (None for an empty value); inside the study's scope."""
    designator = normalise_designator(value)
    if not designator:
        return None
    demonstrator = Demonstrator.objects.filter(designator=designator).only("pk", "designator").first()
    if demonstrator is None:
        raise ValidationError("No demonstrator of this study has this designator.")
    return demonstrator


def demonstrator_history(demonstrator: Demonstrator) -> Q:
    """The events of a demonstrator from consent to withdrawal: its own, and its consent events'."""
    consent = [str(pk) for pk in ConsentEvent.objects.filter(demonstrator=demonstrator).values_list("pk", flat=True)]
    return (Q(target_type=DEMONSTRATOR, target_id=str(demonstrator.pk))
            | Q(target_type=CONSENT_EVENT, target_id__in=consent))


def demonstrator_of(target_type: str, pk: int) -> tuple[str, str] | None:
    """The designator (twice: value and label) of the demonstrator or consent event ``pk``'s demonstrator."""
    demonstrators = Demonstrator.objects.filter(pk=pk) if target_type == DEMONSTRATOR else \
        Demonstrator.objects.filter(consent_events__pk=pk)
    demonstrator = demonstrators.only("pk", "designator").first()
    return (demonstrator.designator, demonstrator.designator) if demonstrator else None


histories.register(histories.History(
    name="demonstrator", find=find_demonstrator, value=lambda demonstrator: demonstrator.designator,
    events=demonstrator_history, targets=(DEMONSTRATOR, CONSENT_EVENT), owner=demonstrator_of))
