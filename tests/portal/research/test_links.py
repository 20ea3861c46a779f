"""Signed download links: issued only after the live check, one audit event and one row each, expiring, and
bound to the one object they name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import botocore.auth
import pytest
from django.core.files.storage import storages
from django.utils import timezone
from django_scopes import scope

from exporter.release import MANIFEST, SIGNATURE
from portal.audit.models import AuditEvent
from portal.core import storage
from portal.research.exceptions import AccessRefused, LinkRefused, ResearchError
from portal.research.models import AccessRequest, IssuedLink
from portal.research.services import access, links
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.study import publish_data_use_agreement
from tests.portal.research.linkfetch import fetch

pytestmark = pytest.mark.django_db


def test_links_to_every_file_of_a_release_serve_its_objects_and_are_each_recorded(storage_kind, released, researcher,
                                                                                  client):
    with scope(study=released.study):
        issued = links.release_links(researcher, released, via="api")
        names = storage.walk(storages["releases"], released.prefix)
        assert sorted(released.prefix + link.path for link in issued) == names
        assert {MANIFEST, SIGNATURE} <= {link.path for link in issued}
        for link in issued[:4]:
            status, body = fetch(client, link.url)
            assert status == 200
            with storages["releases"].open(released.prefix + link.path, "rb") as stored:
                assert body == stored.read()
        rows = list(IssuedLink.objects.filter(user=researcher).order_by("pk"))
    assert [row.path for row in rows] == [link.path for link in issued]
    events = list(AuditEvent.objects.filter(action="research.link_issued").order_by("seq"))
    assert [event.after["link"] for event in events] == [row.pk for row in rows]
    first = events[0]
    assert first.actor_label == researcher.get_username() and first.study_id == released.study_id
    assert first.after["release"] == "release-0001" and first.after["object"] == rows[0].object_name
    assert first.after["expires_at"] == rows[0].expires_at.isoformat()
    assert rows[0].expires_at - rows[0].issued_at == timedelta(seconds=300)
    assert rows[0].episode_index is None and rows[-1].episode_index is not None


@pytest.mark.parametrize("case", ["no request", "not granted", "expired", "revoked", "new agreement"])
def test_no_link_without_an_unexpired_grant_and_the_current_agreement(case, released, reg, make_researcher,
                                                                       make_user):
    user = make_user("nobody") if case == "no request" else make_researcher("r", granted=case != "not granted")
    now = None
    if case == "expired":
        now = timezone.now() + timedelta(days=31)
    elif case == "revoked":
        access.revoke_access(reg.coordinator, AccessRequest.objects.get(researcher=user), reason="ended")
    elif case == "new agreement":
        publish_data_use_agreement(reg.coordinator, reg.study, text="A second version.")
    with scope(study=released.study), pytest.raises(AccessRefused):
        links.release_links(user, released, via="api", now=now)
    assert not IssuedLink.objects.exists()
    assert not AuditEvent.objects.filter(action="research.link_issued").exists()


def test_a_withdrawn_demonstrator_s_episodes_get_no_link(released, researcher, reg):
    with scope(study=reg.study):
        withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=timezone.localdate(), reason="asked")
        with pytest.raises(AccessRefused, match=r"release-0001/episode-000000 is no longer available: .*withdrew"):
            links.release_links(researcher, released, ["episode-000000/meta/info.json"], via="api")
        # The manifest names no person: it stays available (the withdrawal issue supersedes the release).
        assert len(links.release_links(researcher, released, [MANIFEST], via="api")) == 1


def test_unknown_paths_and_too_many_paths_are_refused(released, researcher, settings):
    with scope(study=released.study):
        with pytest.raises(ResearchError, match=r"not a file of this release or dataset: \.\./etc"):
            links.release_links(researcher, released, ["../etc"], via="api")
        settings.CERES_LINKS_PER_REQUEST = 2
        with pytest.raises(ResearchError, match="at most 2 links per request"):
            links.release_links(researcher, released, via="api")


def _issued_ten_minutes_ago(researcher, released, path: str) -> links.Link:
    """A link issued ten minutes ago (the portal's clock and botocore's signing clock set back)."""
    past = timezone.now() - timedelta(minutes=10)
    signed_at = datetime.now(UTC).replace(tzinfo=None, microsecond=0) - timedelta(minutes=10)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.auth, "get_current_datetime", lambda remove_tzinfo=True: signed_at)
        return links.release_links(researcher, released, [path], via="api", now=past)[0]


def test_a_link_stops_working_after_its_expiry(storage_kind, released, researcher, client):
    path = "episode-000001/meta/info.json"
    with scope(study=released.study):
        link = _issued_ten_minutes_ago(researcher, released, path)
        fresh = links.release_links(researcher, released, [path], via="api")[0]
    assert fetch(client, fresh.url)[0] == 200
    status, body = fetch(client, link.url)
    assert status == 403
    assert b"expired" in body  # the portal's "has expired" or the gateway's "Request has expired"


def test_a_link_cannot_be_altered_to_reach_another_object(storage_kind, released, researcher, client):
    with scope(study=released.study):
        link = links.release_links(researcher, released, ["episode-000001/meta/info.json"], via="api")[0]
    if not link.url.startswith("/"):  # an S3 presigned URL
        altered = link.url.replace("episode-000001/meta/info.json", "episode-000002/meta/info.json")
        assert altered != link.url
        status, body = fetch(client, altered)
        assert status == 403 and b"SignatureDoesNotMatch" in body
        return
    token = link.url.rsplit("/", 1)[1]
    payload, _, signature = token.rpartition(":")
    forged = links.signing.dumps({"l": 1, "o": released.prefix + "episode-000002/meta/info.json", "f": "info.json",
                                  "x": 2**31}, salt="another salt")
    for altered in (f"{payload[:-2]}xx:{signature}", forged):
        with pytest.raises(LinkRefused, match="not valid"):
            links.resolve(altered)
        status, body = fetch(client, f"/downloads/{altered}")
        assert status == 403 and b"not valid" in body


@pytest.mark.parametrize("storage_kind", ["local"], indirect=True)  # the portal's own links: its page answers
def test_an_expired_link_answers_in_the_layout_with_a_fresh_link_and_leaves_no_banner(storage_kind, released,
                                                                                       researcher, client):
    path = "episode-000002/meta/info.json"
    with scope(study=released.study):
        expired = _issued_ten_minutes_ago(researcher, released, path)
    client.force_login(researcher)
    response = client.get(expired.url)
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "This download link has expired" in page and 'class="topbar"' in page  # the portal's layout
    release_page = f"/studies/{released.study.code}/released/{released.number}/"
    assert f'href="{release_page}"' in page  # a way back
    file_action = f'action="{release_page}file/"'
    assert file_action in page and f'name="path" value="{path}"' in page  # the button asking for a fresh link

    # The next, unrelated page repeats nothing.
    assert "expired" not in client.get(release_page).content.decode()

    # The button's form gives a fresh link to the same file, which serves it.
    answer = client.post(f"{release_page}file/", {"path": path})
    assert answer.status_code == 302 and answer["Location"] != expired.url
    status, body = fetch(client, answer["Location"])
    with scope(study=released.study):
        stored = storages["releases"].open(released.prefix + path).read()
    assert status == 200 and body == stored
