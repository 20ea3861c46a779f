"""Where a quarantined recording's problems get fixed: one link per problem, to the registry page that fixes it.

The problems are worked out from what the registry check left on the recording (its headset and demonstrator,
None when the claim did not match) and from the registry as it is now, never from the reason text. A link is
offered only to a viewer whose roles open its page; after the fix, "Re-check against the registry" accepts
the recording.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from portal.access.models import Role
from portal.recordings.models import Recording
from portal.studies.models import ConsentEvent, Study
from portal.studies.services.consent import consent_coverage

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER

# problem -> (page title, roles that open the page)
FIX_PAGES: dict[str, tuple[str, frozenset[str]]] = {
    "study": ("Settings", frozenset({COORDINATOR})),
    "headset": ("Headsets", frozenset({COORDINATOR})),
    "demonstrator": ("Register the demonstrator", frozenset({COORDINATOR})),
    "consent": ("Consent", frozenset({COORDINATOR, ETHICS})),
    "consent_document": ("Consent documents", frozenset({COORDINATOR, ETHICS})),
}


@dataclass(frozen=True)
class Fix:
    problem: str
    page: str
    url: str
    action: str


def registry_fixes(recording: Recording, roles: frozenset[str]) -> list[Fix]:
    """The fixes of a quarantined recording whose pages ``roles`` open (none for any other state)."""
    if recording.state != Recording.State.QUARANTINED:
        return []
    study, claims = recording.study, recording.claims
    code = study.code
    fixes: list[tuple[str, str, str]] = []  # problem, url, action
    if study.status != Study.Status.ACTIVE:
        fixes.append(("study", reverse("study-settings", args=[code]), "make the study active"))
    if recording.headset is None:
        claimed = claims.get("headset_id")
        action = (f"register headset {claimed!r}, or correct its retirement date" if claimed
                  else "the capture names no headset: it cannot be accepted as it is")
        fixes.append(("headset", reverse("study-headsets", args=[code]), action))
    demonstrator = recording.demonstrator
    if demonstrator is None:
        claimed = claims.get("demonstrator_id")
        # Registered from this page (the designator comes from the recording and its headset), then consent.
        fixes.append(("demonstrator", "#register-demonstrator",
                      f"register demonstrator {claimed!r}, then record their consent" if claimed else
                      "register a demonstrator with a generated designator, then record their consent"))
    elif recording.recorded_on is not None:
        coverage = consent_coverage(demonstrator, recording.recorded_on, ConsentEvent.Scope.EPISODE_RELEASE)
        if coverage.document is not None and not coverage.document.is_accepted:
            fixes.append(("consent_document", reverse("study-consent-documents", args=[code]),
                          f"an ethics officer accepts consent document {coverage.document}"))
        elif not coverage.covered:
            fixes.append(("consent", reverse("study-demonstrator", args=[code, demonstrator.pk]),
                          f"record consent of {demonstrator.designator} dated on or before {recording.recorded_on}"))
    return [Fix(problem, FIX_PAGES[problem][0], url, action) for problem, url, action in fixes
            if FIX_PAGES[problem][1] & roles]
