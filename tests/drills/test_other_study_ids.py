"""Drill: every study URL of the configuration (walked, not listed by hand) asked in one study with the ids of
another study's objects — its recordings, episodes, releases, datasets, headsets, demonstrators, consent, access
requests, withdrawals, alerts, fixity runs, audit events — by a user holding every role in the first study.
Nothing of the other study is ever served or acted on: every such URL answers 404 (or 405 to the method it does
not take), never a page, a redirect after an action, or data."""

from __future__ import annotations

import itertools
from datetime import date, timedelta

import pytest
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from portal.audit.models import AuditEvent
from portal.fixity.models import Alert, FixityRun
from portal.fixity.services import runs
from portal.recordings.models import Recording
from portal.releases.models import ReleaseRequest
from portal.research.models import AccessRequest, Dataset, IssuedLink, Withdrawal
from portal.research.services import access, catalogue, datasets, links
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.models import ConsentDocument, ConsentEvent, Demonstrator, Headset
from portal.studies.services.consent import give_consent
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.study import publish_data_use_agreement
from tests.portal.urlwalk import all_routes, url_of

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def other(reg, make_released, verified, make_user, agreement):
    """Study B (the registry's): a release, a dataset, a researcher's request and links, a withdrawal, an alert,
    a fixity run; every id of it, by the URL argument it could fill."""
    study = reg.study
    released = make_released(verified(1))
    researcher = make_user(f"{study.code}-r")
    asked = access.request_access(researcher, study, purpose="x", version=agreement.version, sha256=agreement.sha256)
    access.grant_access(reg.coordinator, asked, expires_at=timezone.now() + timedelta(days=3))
    with scope(study=study):
        item = catalogue.released_items().get(request=released)
        dataset, _ = datasets.request_dataset(researcher, study, [item])
        datasets.build_dataset(dataset.pk)
        links.release_links(researcher, released, via="api")
        leaving = create_demonstrator(reg.coordinator, study)
        give_consent(reg.coordinator, leaving, document=reg.document, consent_date=date.today(),
                     scopes=["episode_release"])
        withdraw_consent(reg.coordinator, leaving, withdrawal_date=date.today(), reason="asked")
    runs.run_fixity("drill", full=True, studies=[study])
    with scopes_disabled():
        Alert.objects.create(study=study, kind=Alert.Kind.RECEIPT_MISMATCH, message="a drill alert")
        pks = {model.__name__: list(model.objects.filter(study=study).values_list("pk", flat=True))
               for model in (Headset, Demonstrator, ConsentDocument, ConsentEvent, Withdrawal, Alert, IssuedLink)}
        values = {
            "pk": sorted({pk for group in pks.values() for pk in group}),
            "headset_pk": pks["Headset"], "demonstrator_pk": pks["Demonstrator"], "document_pk": pks["ConsentDocument"],
            "uid": [*Recording.objects.filter(study=study).values_list("uid", flat=True),
                    *AccessRequest.objects.filter(study=study).values_list("uid", flat=True),
                    *ReleaseRequest.objects.filter(study=study).values_list("uid", flat=True),
                    *Dataset.objects.filter(study=study).values_list("uid", flat=True)],
            "number": sorted({*ReleaseRequest.objects.filter(study=study).values_list("number", flat=True),
                              *Dataset.objects.filter(study=study).values_list("number", flat=True)}),
            "episode_index": [0],
            "seq": list(AuditEvent.objects.filter(study_id=study.pk).order_by("-seq")
                        .values_list("seq", flat=True)[:5]),
            "run_id": list(FixityRun.objects.values_list("pk", flat=True)),
        }
    return values


def test_no_url_of_one_study_serves_another_studys_object(client, other, make_study, make_user):
    home = make_study(f"home{timezone.now():%H%M%S%f}")
    everyone = make_user(f"{home.code}-all", home, ["coordinator", "ethics_officer", "researcher"])
    publish_data_use_agreement(everyone, home, text="Home agreement.")
    client.force_login(everyone)
    asked, wrong = 0, []
    for route in all_routes():
        arguments = [a for a in route.arguments if a != "study_code"]
        if "study_code" not in route.arguments or not arguments:
            continue
        for combination in itertools.product(*(other[name] for name in arguments)):
            url = url_of(route, {"study_code": home.code, **dict(zip(arguments, combination, strict=True))})
            answers = {}
            for method in ("GET", "POST"):
                response = client.generic(method, url, headers={"accept": "application/json"})
                answers[method] = response.status_code
                asked += 1
            if sorted(answers.values()) not in ([404, 404], [404, 405]):
                wrong.append(f"{route.key} {url}: {answers}")
    assert asked > 200
    assert not wrong, "\n".join(wrong)
    print(f"{asked} URLs asked with another study's ids: every one 404 or 405")
