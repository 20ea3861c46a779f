"""The browse page's and the live check's queries compiled once per process (``core.fixed_query``): each sends the
SQL the scoped ORM query sends, and reads what it reads, anew on every request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_scopes import scope

from portal.access.models import Role, RoleGrant
from portal.releases.models import EpisodeTag, ReleaseItem, ReleaseRequest
from portal.research.services import access, catalogue
from portal.studies.services.study import publish_data_use_agreement

pytestmark = pytest.mark.django_db


def _sql(read) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        rows = list(read())
    return [query["sql"] for query in captured.captured_queries], rows


def test_the_browse_menus_send_the_scoped_orms_sql(reg, released):
    study = reg.study
    with scope(study=study):
        EpisodeTag.objects.create(study=study, episode=ReleaseItem.objects.first().episode,
                                  kind=EpisodeTag.Kind.values[0], value="pour <water> & 'tea'")
        pairs = [
            (lambda: catalogue._STILL_SERVING.rows(study_id=study.pk),
             lambda: catalogue._still_serving_query(ReleaseRequest.objects.all())),
            (lambda: catalogue._PUBLISHED_TAGS.rows(study_id=study.pk),
             lambda: catalogue._tag_menus(EpisodeTag.objects.all(), catalogue._released_items([]))),
            (lambda: catalogue._RELEASE_NUMBERS.rows(study_id=study.pk),
             lambda: catalogue.released_requests().order_by("-number").values_list("number")),
        ]
        for compiled, orm in pairs:
            assert _sql(compiled) == _sql(orm)
        items, values, numbers = catalogue.browse_menus()
        assert list(items) == list(catalogue.released_items()) and len(items) == 3
        expected = {kind: [] for kind in EpisodeTag.Kind.values}
        for kind, value in catalogue._tag_menus(EpisodeTag.objects.all(), catalogue.released_items()):
            expected[kind].append(value)
        assert values == expected and "pour <water> & 'tea'" in values[EpisodeTag.Kind.values[0]]
        assert numbers == [released.number]


def test_the_live_check_reads_the_grant_agreement_and_acceptance_of_now(reg, agreement, researcher):
    study = reg.study
    assert access.access_problem(researcher, study) == ""
    accepted = access.check_access(researcher, study)
    assert accepted == access.latest_acceptance(researcher, study) and accepted.version == agreement.version
    publish_data_use_agreement(reg.coordinator, study, text="new terms")
    assert access.access_problem(researcher, study) == (
        f"accept version {agreement.version + 1} of the data-use agreement of study {study.code} first "
        f"(you accepted version {agreement.version})")
    grant = RoleGrant.objects.get(user=researcher, study=study, role=Role.RESEARCHER)
    grant.expires_at = timezone.now() - timedelta(minutes=1)
    grant.save()
    assert "ended on" in access.access_problem(researcher, study)
    grant.delete()
    assert "you hold no researcher grant" in access.access_problem(researcher, study)
