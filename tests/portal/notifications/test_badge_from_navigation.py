"""The header's unread badge is read from the navigation's query (no count of its own), and counted on its own
for a user who holds no grant (the navigation then has no row)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from portal.notifications.models import Email, Kind, Notification

pytestmark = pytest.mark.django_db


def _unread(user, count: int) -> None:
    Notification.objects.bulk_create([Notification(recipient=user, kind=Kind.values[0], title=f"m{n}",
                                                   email=Email.values[0]) for n in range(count)])


def _page(client, url: str) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        page = client.get(url).content.decode()
    return page.split("<main>")[0], [query["sql"] for query in captured.captured_queries]


def test_the_badge_comes_from_the_navigation_and_follows_reads(client, study, coordinator, make_user):
    other = make_user("other", study, ["coordinator"])
    _unread(coordinator, 3)
    _unread(other, 5)
    client.force_login(coordinator)
    url = reverse("study-overview", args=[study.code])
    header, queries = _page(client, url)
    assert 'aria-label="3 unread"' in header
    assert not [sql for sql in queries if sql.startswith('SELECT COUNT(*) AS "__count" FROM "notifications_')]
    Notification.objects.filter(recipient=coordinator).order_by("pk").first().delete()
    assert 'aria-label="2 unread"' in _page(client, url)[0]  # the next request sees it
    Notification.objects.filter(recipient=coordinator).update(read_at="2026-01-01T00:00:00Z")
    assert "unread" not in _page(client, url)[0]


def test_a_user_without_a_grant_has_the_badge_counted(client, make_user):
    user = make_user("nobody")
    _unread(user, 2)
    client.force_login(user)
    header, queries = _page(client, reverse("notifications"))
    assert 'aria-label="2 unread"' in header
    assert [sql for sql in queries if 'FROM "notifications_notification"' in sql and "COUNT(*)" in sql]
