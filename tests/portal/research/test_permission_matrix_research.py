"""Every researcher-access page and API endpoint against every kind of caller, generated from the URL
configuration: a pattern of a ``portal.research`` view without an entry in ``EXPECTED`` fails. The callers
include researchers whose grant expired or was revoked, one who never accepted the agreement, and one still
waiting for a decision: only the researcher with an unexpired grant and the current agreement ever gets a
download link, from any endpoint."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from exporter.release import DATASET_MANIFEST, MANIFEST
from portal.access.models import Role, RoleGrant
from portal.access.services import grant_role
from portal.research.models import AccessRequest, IssuedLink, Withdrawal
from portal.research.services import access, catalogue, datasets
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.consent import give_consent
from portal.studies.services.demonstrators import create_demonstrator
from tests.portal.urlwalk import study_url_patterns

pytestmark = pytest.mark.django_db

C, E, R = "coordinator", "ethics_officer", "researcher"
# researcher: granted, agreement accepted. no_agreement: a researcher grant (given in the admin) but no
# acceptance. expired, revoked: their grant ended. applicant: a request waiting. Then another study's staff.
PERSONAS = (C, E, R, "no_agreement", "expired", "revoked", "applicant", "other_study", "anonymous")
STEWARDS = {C: 200, E: 200}
ACCEPTS = ("application/json", "text/html")


def only(status: int, *personas: str) -> dict[str, int]:
    return dict.fromkeys(personas, status)


# name -> [(method, {persona: status}, body)]; any persona not named gets 403 (anonymous: the login redirect on
# pages, 403 on the API). Researcher pages answer the researcher and no_agreement (who holds the role) alike;
# only the link endpoints tell them apart.
LINK_BODY, DATASET_LINK_BODY = {"path": MANIFEST}, {"path": DATASET_MANIFEST}
EXPECTED: dict[str, list[tuple[str, dict[str, int], dict | None]]] = {
    "research-access-requests": [("GET", STEWARDS, None)],
    "research-study-links": [("GET", STEWARDS, None)],
    "research-access-grant": [("POST", only(302, C, E), None)],
    "research-access-refuse": [("POST", only(302, C, E), None)],
    "research-access-revoke": [("POST", only(302, C, E), None)],
    # Any signed-in user reads the agreement and may ask for access or cancel their own request.
    "research-ask": [("GET", only(200, C, E, R, "no_agreement", "expired", "revoked", "applicant", "other_study"),
                      None)],
    "research-agreement": [("GET", only(200, C, E, R, "no_agreement", "expired", "revoked", "applicant",
                                        "other_study"), None)],
    "research-access-cancel": [("POST", only(302, C, E, R, "no_agreement", "expired", "revoked", "applicant",
                                             "other_study"), None)],
    "research-browse": [("GET", only(200, R, "no_agreement"), None)],
    "research-release": [("GET", only(200, R, "no_agreement"), None)],
    "research-release-file": [("POST", only(302, R, "no_agreement"), LINK_BODY)],
    "research-release-links": [("POST", {R: 200, "no_agreement": 403}, LINK_BODY)],
    # The whole release or dataset as one ZIP: the same live check as a link, before the first byte.
    "research-release-zip": [("POST", {R: 200, "no_agreement": 403}, None)],
    "research-episode": [("GET", only(200, R, "no_agreement"), None)],
    # The viewer's data and video are given out like files: the current agreement is needed too.
    "research-episode-data": [("GET", {R: 200, "no_agreement": 403}, None)],
    "research-episode-video": [("GET", {R: 200, "no_agreement": 403}, None)],
    "research-datasets": [("GET", only(200, R, "no_agreement"), None)],
    # A dataset's pages answer only who asked for it (the researcher); another holder of the role gets 404.
    "research-dataset": [("GET", {R: 200, "no_agreement": 404}, None)],
    "research-dataset-status": [("GET", {R: 200, "no_agreement": 404}, None)],
    "research-dataset-file": [("POST", {R: 302, "no_agreement": 404}, DATASET_LINK_BODY)],
    "research-dataset-links": [("POST", {R: 200, "no_agreement": 404}, DATASET_LINK_BODY)],
    "research-dataset-zip": [("POST", {R: 200, "no_agreement": 404}, None)],
    "api-agreement-list": [("GET", only(200, C, E, R, "no_agreement", "expired", "revoked", "applicant",
                                        "other_study"), None)],
    "api-agreement-accept": [("POST", only(400, C, E, R, "no_agreement", "expired", "revoked", "applicant",
                                           "other_study"), None)],
    "api-access-request-list": [("GET", STEWARDS, None)],
    "api-access-request-detail": [("GET", STEWARDS, None)],
    "api-access-request-grant": [("POST", only(400, C, E), None)],
    "api-access-request-refuse": [("POST", only(400, C, E), None)],
    "api-access-request-revoke": [("POST", only(400, C, E), None)],
    "api-released-list": [("GET", only(200, R, "no_agreement"), None)],
    "api-released-detail": [("GET", only(200, R, "no_agreement"), None)],
    "api-released-links": [("POST", {R: 200, "no_agreement": 403}, {"paths": [MANIFEST]})],
    "api-released-episode-list": [("GET", only(200, R, "no_agreement"), None)],
    "api-dataset-list": [("GET", only(200, R, "no_agreement"), None), ("POST", only(400, R, "no_agreement"), None)],
    "api-dataset-detail": [("GET", {R: 200, "no_agreement": 404}, None)],
    "api-dataset-links": [("POST", {R: 200, "no_agreement": 404}, {"paths": [DATASET_MANIFEST]})],
    "api-issued-link-list": [("GET", only(200, C, E, R, "no_agreement"), None)],
    "research-withdrawals": [("GET", STEWARDS, None)],
    "research-withdrawal": [("GET", STEWARDS, None)],
    "research-withdrawal-status": [("GET", STEWARDS, None)],
    "research-withdrawal-run-again": [("POST", only(302, C, E), None)],  # refused: the job is not failed
    # The registry's consent events and withdrawal form, routed from research where a withdrawal starts (an empty
    # form or body: the coordinator gets its errors).
    "study-withdraw-consent": [("POST", only(400, C), None)],
    "api-consent-event-list": [("GET", STEWARDS, None), ("POST", only(400, C), None)],
    "api-consent-event-detail": [("GET", STEWARDS, None)],
}

PATTERNS = study_url_patterns("portal.research")


def test_every_research_url_has_an_expectation():
    assert sorted(PATTERNS) == sorted(EXPECTED)


@pytest.fixture
def world(reg, released, make_researcher, make_user, make_study):
    study = reg.study
    researcher = make_researcher("granted")
    with scope(study=study):
        item = catalogue.released_items().get(episode_index=0)
        dataset, _ = datasets.request_dataset(researcher, study, [item])
        datasets.build_dataset(dataset.pk)
    no_agreement = make_user(f"{study.code}-noagree")
    grant_role(reg.coordinator, no_agreement, study, Role.RESEARCHER, expires_at=timezone.now() + timedelta(days=30))
    expired = make_researcher("expired")
    RoleGrant.objects.filter(user=expired, study=study).update(expires_at=timezone.now() - timedelta(minutes=1))
    revoked = make_researcher("revoked")
    access.revoke_access(reg.coordinator, AccessRequest.objects.get(researcher=revoked), reason="left")
    applicant = make_researcher("applicant", granted=False)
    other = make_study(f"{study.code}-b")
    pending = AccessRequest.objects.get(researcher=applicant)
    with scope(study=study):  # a withdrawal of someone without episodes: the researcher's links stay
        leaving = create_demonstrator(reg.coordinator, study)
        give_consent(reg.coordinator, leaving, document=reg.document, consent_date=date.today(),
                     scopes=["episode_release"])
        event = withdraw_consent(reg.coordinator, leaving, withdrawal_date=date.today(), reason="asked")
        withdrawal = Withdrawal.objects.get(event=event)
    return {
        "study": study,
        "values": {"number": released.number, "episode_index": 0, "uid": pending.uid, "pk": withdrawal.pk,
                   "demonstrator_pk": leaving.pk},
        "values_of": {"api-consent-event-detail": {"pk": event.pk}},
        "users": {C: reg.coordinator, E: reg.ethics, R: researcher, "no_agreement": no_agreement,
                  "expired": expired, "revoked": revoked, "applicant": applicant,
                  "other_study": make_user(f"{study.code}-o", other, [C, E]), "anonymous": None},
    }


def test_permission_matrix(client, world):
    with scope(study=world["study"]):
        before = set(IssuedLink.objects.values_list("pk", flat=True))
    for name in sorted(PATTERNS):
        values = {**world["values"], **world["values_of"].get(name, {})}
        kwargs = {arg: world["study"].code if arg == "study_code" else values[arg] for arg in PATTERNS[name]}
        url = reverse(name, kwargs=kwargs)
        api = url.startswith("/api/")
        for method, allowed, body in EXPECTED[name]:
            for accept in (ACCEPTS if method == "GET" else ("*/*",)):
                for persona in PERSONAS:
                    user = world["users"][persona]
                    client.logout()
                    if user is not None:
                        client.force_login(user)
                    if body is None:
                        response = client.generic(method, url, headers={"accept": accept})
                    elif api:
                        response = client.post(url, body, content_type="application/json")
                    else:
                        response = client.post(url, body)
                    where = f"{method} {url} ({accept}) as {persona}: {response.status_code}"
                    if persona in allowed:
                        assert response.status_code == allowed[persona], where
                    elif persona == "anonymous":
                        assert response.status_code == (403 if api else 302), where
                        assert api or response["Location"].startswith("/accounts/login/"), where
                    else:
                        assert response.status_code == 403, where
    with scope(study=world["study"]):
        issued = IssuedLink.objects.exclude(pk__in=before)
        assert issued.exists()
        assert set(issued.values_list("user__username", flat=True)) == {world["users"][R].get_username()}
