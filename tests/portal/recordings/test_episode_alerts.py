"""The episodes list's integrity alerts: the newest 20 with their number; counted only when 20 are shown (fewer
shown are all there is)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django_scopes import scope

from portal.fixity.models import Alert

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("alerts", "counted", "said"), [(0, False, None), (3, False, "3 unresolved"),
                                                         (20, True, "20 unresolved"), (23, True, "23 unresolved")])
def test_the_alerts_are_counted_only_when_a_full_list_is_shown(client, study, coordinator, alerts, counted, said):
    with scope(study=study):
        Alert.objects.bulk_create([Alert(study=study, kind=Alert.Kind.RECEIPT_MISMATCH, message=f"mismatch {n}")
                                   for n in range(alerts)])
    client.force_login(coordinator)
    with CaptureQueriesContext(connection) as captured:
        page = client.get(reverse("episode-list", args=[study.code])).content.decode()
    counts = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT COUNT(*)")
              and '"fixity_alert"' in q["sql"]]
    assert bool(counts) is counted
    if said is None:
        assert 'id="alerts"' not in page
    else:
        assert f"Integrity alerts <small>{said}</small>" in page and page.count("mismatch ") == min(alerts, 20)
        assert ("The 20 newest are shown." in page) is (alerts > 20)
