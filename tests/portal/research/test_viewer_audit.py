"""Every fetch that serves a released episode's video from its first byte is an audit event, whatever the Range
header says (the decision is made on the span served, not on the header's text); and every fetch through a portal
download link (local storage) is an audit event naming the link and the bytes it served."""

from __future__ import annotations

import pytest
from django.core.files.storage import storages
from django.urls import reverse
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.core import storage
from portal.research.services import links

pytestmark = pytest.mark.django_db


@pytest.fixture
def local_storage(settings, tmp_path):
    """Local folders, whose download links the portal serves itself (on S3 the storage serves them)."""
    settings.STORAGES = {**settings.STORAGES, **{
        name: {"BACKEND": "django.core.files.storage.FileSystemStorage",
               "OPTIONS": {"location": str(tmp_path / "local-storage" / name)}}
        for name in settings.STORAGE_NAMES}}


def _stored_video(released) -> bytes:
    names = [name for name in storage.walk(storages["releases"], released.prefix)
             if "/episode-000001/" in name and name.endswith(".mp4")]
    assert len(names) == 1, names
    with storages["releases"].open(names[0], "rb") as stored:
        return stored.read()


def _viewed(user) -> int:
    return AuditEvent.objects.filter(action="research.episode_viewed", actor_id=user.pk, after__part="video").count()


# Each of these is answered with the whole video (RFC 9110: the unit is case-insensitive, a suffix longer than the
# object is all of it, leading zeros are a number, a unit the server does not know is ignored).
WHOLE = [None, "bytes=0-", "bytes=-999999999", "bytes=00-", "Bytes=0-", "BYTES=0-", "items=0-", "bytes=0-,5-9",
         "bytes = 0-", "bytes=0-999999999"]


@pytest.mark.parametrize("header", WHOLE, ids=[str(h) for h in WHOLE])
def test_every_request_served_the_whole_video_is_logged(client, released, researcher, header):
    whole = _stored_video(released)
    client.force_login(researcher)
    url = reverse("research-episode-video", args=[released.study.code, released.number, 1])
    response = client.get(url, headers={"range": header} if header is not None else {})
    assert response.status_code in (200, 206)
    assert b"".join(response.streaming_content) == whole
    assert _viewed(researcher) == 1


def test_a_part_from_the_first_byte_is_logged_and_a_later_part_is_not(client, released, researcher):
    whole = _stored_video(released)
    client.force_login(researcher)
    url = reverse("research-episode-video", args=[released.study.code, released.number, 1])
    later = client.get(url, headers={"range": "bytes=1-"})  # all but the first byte: no player starts here
    assert later.status_code == 206 and b"".join(later.streaming_content) == whole[1:]
    assert _viewed(researcher) == 0
    first = client.get(url, headers={"range": "bytes=0-0"})  # the byte that completes it is logged
    assert first.status_code == 206 and b"".join(first.streaming_content) == whole[:1]
    assert _viewed(researcher) == 1
    refused = client.get(url, headers={"range": f"bytes={len(whole)}-"})  # nothing served: nothing logged
    assert refused.status_code == 416
    assert _viewed(researcher) == 1


def test_each_fetch_through_a_portal_download_link_is_logged(local_storage, client, released, researcher):
    with scope(study=released.study):
        link = links.release_links(researcher, released, ["episode-000001/meta/info.json"], via="api")[0]
    with storages["releases"].open(released.prefix + link.path, "rb") as stored:
        content = stored.read()
    client.logout()  # a link is a bearer capability: no sign-in
    whole = client.get(link.url)
    assert whole.status_code == 200 and b"".join(whole.streaming_content) == content
    part = client.get(link.url, headers={"range": "bytes=-10"})
    assert part.status_code == 206 and b"".join(part.streaming_content) == content[-10:]
    assert client.get(link.url, headers={"range": f"bytes={len(content)}-"}).status_code == 416  # nothing served
    fetched = list(AuditEvent.objects.filter(action="research.link_fetched").order_by("seq"))
    issued = AuditEvent.objects.get(action="research.link_issued")
    assert [(event.after["link"], event.after["object"], event.after["first_byte"], event.after["last_byte"],
             event.after["size"]) for event in fetched] == [
        (issued.after["link"], released.prefix + link.path, 0, len(content) - 1, len(content)),
        (issued.after["link"], released.prefix + link.path, len(content) - 10, len(content) - 1, len(content))]
    assert {event.study_id for event in fetched} == {released.study_id}
    assert {event.after["issued_to"] for event in fetched} == {researcher.get_username()}
