"""Every alert and fixity page and API endpoint against every kind of caller, generated from the URL configuration:
a pattern of a ``portal.fixity`` view without an entry in ``EXPECTED`` fails. Only the study's coordinators and
ethics officers get in; a researcher of the study, the people of another study, someone whose grant expired and
the anonymous do not."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from portal.fixity.models import Alert, FixityProblem, FixityRun, FixityRunStudy
from portal.fixity.services import alerts
from tests.portal.matrix import ask_every_persona
from tests.portal.urlwalk import study_url_patterns

pytestmark = pytest.mark.django_db

C, E = "coordinator", "ethics_officer"
PERSONAS = ("coordinator", "ethics_officer", "researcher", "expired", "other_study", "anonymous")

# name -> [(method, roles allowed, status for an allowed caller)]; POSTs carry an empty body (no note: refused,
# the page says so on the alert's page, the API answers 400).
EXPECTED: dict[str, list[tuple[str, tuple[str, ...], int]]] = {
    "alert-list": [("GET", (C, E), 200)],
    "alert-detail": [("GET", (C, E), 200)],
    "alert-acknowledge": [("POST", (C, E), 302)],
    "alert-resolve": [("POST", (C, E), 302)],
    "fixity-runs": [("GET", (C, E), 200)],
    "fixity-run": [("GET", (C, E), 200)],
    "api-alert-list": [("GET", (C, E), 200)],
    "api-alert-detail": [("GET", (C, E), 200)],
    "api-alert-acknowledge": [("POST", (C, E), 400)],
    "api-alert-resolve": [("POST", (C, E), 400)],
}

PATTERNS = study_url_patterns("portal.fixity")


def test_every_fixity_url_has_an_expectation():
    assert sorted(PATTERNS) == sorted(EXPECTED)


def _seed(study) -> dict:
    """An alert found by a run, with one problem, in ``study``."""
    run = FixityRun.objects.create(kind=FixityRun.Kind.FULL, requested_by="test", finished_at=timezone.now())
    with scope(study=study):
        FixityRunStudy.objects.create(study=study, run=run, objects_listed=1, problem_count=1)
        alert = alerts.raise_alert(study, kind=Alert.Kind.FIXITY, run=run, message=f"{study.code}/x: orphan")
        FixityProblem.objects.create(run=run, study=study, kind=FixityProblem.Kind.ORPHAN, storage="shards",
                                     object_name=f"{study.code}/x", detail="no record accounts for it", alert=alert)
    return {"pk": alert.pk, "run_id": run.pk}


@pytest.fixture
def world(make_study, make_user):
    study = make_study("fx")
    other = make_study("fx-other")
    values = _seed(study)
    return {
        "study": study, "other": other, "values": values, "other_values": _seed(other),
        "users": {"coordinator": make_user("fx-coord", study, [C]),
                  "ethics_officer": make_user("fx-ethics", study, [E]),
                  "researcher": make_user("fx-researcher", study, ["researcher"]),
                  "expired": make_user("fx-expired", study, [C, E], expires_at=timezone.now() - timedelta(days=1)),
                  "other_study": make_user("fx-o", other, [C, E]), "anonymous": None},
    }


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_permission_matrix(client, world, name):
    ask_every_persona(client, world, name, PATTERNS[name], EXPECTED[name], PERSONAS)
    with scope(study=world["study"]):
        assert Alert.objects.get().state == Alert.State.OPEN  # nobody acknowledged or resolved without a note


def test_another_studys_alert_and_run_are_not_found_here(client, world):
    """The other study's alert and run, asked for under this study's URLs, by this study's coordinator: 404."""
    client.force_login(world["users"]["coordinator"])
    code, foreign = world["study"].code, world["other_values"]
    for url in (reverse("alert-detail", args=[code, foreign["pk"]]),
                reverse("fixity-run", args=[code, foreign["run_id"]]), f"/api/studies/{code}/alerts/{foreign['pk']}/"):
        assert client.get(url).status_code == 404, url
    for url in (reverse("alert-acknowledge", args=[code, foreign["pk"]]),
                f"/api/studies/{code}/alerts/{foreign['pk']}/acknowledge/"):
        assert client.post(url, {"note": "not mine"}).status_code == 404, url
    with scope(study=world["other"]):
        assert Alert.objects.get().state == Alert.State.OPEN


def test_problems_of_no_study_and_of_another_study_stay_out_of_the_studys_run_page(client, world):
    run = FixityRun.objects.get(pk=world["values"]["run_id"])
    FixityProblem.objects.with_scopes_disabled().create(run=run, study=None, kind=FixityProblem.Kind.ORPHAN,
                                                        storage="shards", object_name="nobody/x", detail="no study")
    client.force_login(world["users"]["ethics_officer"])
    page = client.get(reverse("fixity-run", args=[world["study"].code, run.pk])).content.decode()
    assert f'data-object="shards:{world["study"].code}/x"' in page
    assert "nobody/x" not in page and "fx-other/x" not in page
