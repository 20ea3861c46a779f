"""A whole release or dataset as one ZIP: stored, its length known before the first byte and equal to what is
sent, laid out as ``ceres-pull`` writes a folder (``verify-release`` passes on it unzipped), given only after the
live check a link gets, one audit event and a row per file (a withdrawal reaches whoever got it), cut when a stored
object does not match its manifest, and flat in memory whatever its size."""

from __future__ import annotations

import hashlib
import io
import logging
import re
import zipfile
from datetime import date
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, storages
from django.http import StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from exporter.cli import main as exporter_main
from exporter.release import DATASET_MANIFEST, MANIFEST, SIGNATURE
from portal.audit.models import AuditEvent
from portal.core import signing
from portal.core.storage import ObjectMismatch
from portal.research.exceptions import AccessRefused, ResearchError
from portal.research.models import AccessRequest, IssuedLink, Withdrawal
from portal.research.services import access, archives, catalogue, datasets
from portal.research.services.withdrawals import compute_reach, withdraw_consent
from portal.studies.services.study import publish_data_use_agreement

pytestmark = pytest.mark.django_db


def post_zip(client, user, name: str, study, number: int):
    client.force_login(user)
    return client.post(reverse(name, args=[study.code, number]))


def body_of(response) -> bytes:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content)


def verify(folder: Path, tmp_path: Path) -> int:
    key = tmp_path / "ceres-release-key.pem"
    key.write_text(signing.public_key_pem())
    return exporter_main(["verify-release", str(folder), "--public-key", str(key)])


def unzip(body: bytes, tmp_path: Path) -> tuple[zipfile.ZipFile, Path]:
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.testzip() is None
    assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}
    archive.extractall(tmp_path / "unzipped")
    return archive, tmp_path / "unzipped"


def test_a_release_downloads_as_one_zip_that_verify_release_accepts(storage_kind, released, researcher, client,
                                                                    tmp_path):
    response = post_zip(client, researcher, "research-release-zip", released.study, released.number)
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    folder = f"{released.study.code}-release-0001"
    assert response["Content-Disposition"] == f'attachment; filename="{folder}.zip"'
    body = body_of(response)
    assert len(body) == int(response["Content-Length"])
    archive, unzipped = unzip(body, tmp_path)
    with scope(study=released.study):
        files = catalogue.release_files(released)
    assert sorted(info.filename for info in archive.infolist()) == sorted(f"{folder}/{path}" for path in files)
    assert {MANIFEST, SIGNATURE} <= {path.name for path in (unzipped / folder).iterdir()}
    assert verify(unzipped / folder, tmp_path) == 0

    event = AuditEvent.objects.get(action="research.archive_downloaded")
    assert event.actor_label == researcher.get_username() and event.study_id == released.study_id
    total = sum(info.file_size for info in archive.infolist())
    assert event.after == {"release": "release-0001", "dataset": None, "files": len(files), "bytes": total,
                           "zip_bytes": len(body), "filename": f"{folder}.zip"}
    with scope(study=released.study):
        rows = IssuedLink.objects.filter(user=researcher)
        assert set(rows.values_list("via", flat=True)) == {IssuedLink.Via.ZIP}
        assert sorted(rows.values_list("path", flat=True)) == sorted(files)
    assert not AuditEvent.objects.filter(action="research.link_issued").exists()


def test_each_download_is_one_audit_event(released, researcher, client):
    for _ in range(2):
        body_of(post_zip(client, researcher, "research-release-zip", released.study, released.number))
    assert AuditEvent.objects.filter(action="research.archive_downloaded").count() == 2


def test_a_dataset_downloads_as_one_zip_that_verify_release_accepts(storage_kind, released, researcher, client,
                                                                    tmp_path):
    with scope(study=released.study):
        items = list(catalogue.released_items().filter(request=released).select_related("request"))
        dataset, _ = datasets.request_dataset(researcher, released.study, items[:2])
        datasets.build_dataset(dataset.pk)
    response = post_zip(client, researcher, "research-dataset-zip", released.study, dataset.number)
    assert response.status_code == 200
    body = body_of(response)
    assert len(body) == int(response["Content-Length"])
    _, unzipped = unzip(body, tmp_path)
    folder = unzipped / f"{released.study.code}-dataset-0001"
    assert (folder / DATASET_MANIFEST).is_file()
    assert verify(folder, tmp_path) == 0
    event = AuditEvent.objects.get(action="research.archive_downloaded")
    assert event.after["dataset"] == "dataset-0001" and event.after["release"] is None


@pytest.mark.parametrize("case", ["new agreement", "revoked", "withdrawn"])
def test_refused_like_a_link_and_no_zip(case, released, researcher, reg, client):
    if case == "new agreement":
        publish_data_use_agreement(reg.coordinator, reg.study, text="A second version.")
    elif case == "revoked":
        access.revoke_access(reg.coordinator, AccessRequest.objects.get(researcher=researcher), reason="ended")
    else:
        with scope(study=reg.study):
            withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=timezone.localdate(), reason="asked")
    response = post_zip(client, researcher, "research-release-zip", released.study, released.number)
    assert response.status_code == 403
    assert not response.streaming and response["Content-Type"].startswith("text/html")
    if case == "withdrawn":
        assert "elease-0001/episode-000000 is no longer available" in response.content.decode()
        assert b'id="archive-refused"' in response.content
    assert not AuditEvent.objects.filter(action="research.archive_downloaded").exists()
    with scope(study=released.study):
        assert not IssuedLink.objects.exists()


def test_a_researcher_without_a_grant_gets_no_zip(released, make_researcher):
    waiting = make_researcher("waiting", granted=False)
    with scope(study=released.study), pytest.raises(AccessRefused):
        archives.release_archive(waiting, released)
    assert not AuditEvent.objects.filter(action="research.archive_downloaded").exists()


def test_a_withdrawal_reaches_whoever_downloaded_the_zip(released, researcher, reg, client):
    body_of(post_zip(client, researcher, "research-release-zip", released.study, released.number))
    with scope(study=reg.study):
        event = withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(), reason="asked")
        reach = compute_reach(Withdrawal.objects.get(event=event))
    assert [entry["username"] for entry in reach["researchers"]] == [researcher.get_username()]


def test_a_tampered_object_cuts_the_stream_before_the_zip_is_complete(storage_kind, released, researcher, client,
                                                                       caplog):
    path = "episode-000001/meta/info.json"
    store = storages["releases"]
    original = store.open(released.prefix + path).read()
    store.delete(released.prefix + path)
    store.save(released.prefix + path, ContentFile(b"X" + original[1:]))  # the same length, other bytes
    response = post_zip(client, researcher, "research-release-zip", released.study, released.number)
    assert response.status_code == 200
    sent = bytearray()
    with caplog.at_level(logging.ERROR, logger="portal.research.services.archives"), \
            pytest.raises(ObjectMismatch, match=re.escape(path)):
        for chunk in response.streaming_content:
            sent += chunk
    assert len(sent) < int(response["Content-Length"])
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(bytes(sent)))
    assert any(record.levelno == logging.ERROR and path in record.getMessage() for record in caplog.records)


def test_an_object_longer_than_its_manifest_says_cuts_the_stream(released, researcher, client):
    path = "episode-000002/meta/info.json"
    store = storages["releases"]
    original = store.open(released.prefix + path).read()
    store.delete(released.prefix + path)
    store.save(released.prefix + path, ContentFile(original + b"\n"))
    response = post_zip(client, researcher, "research-release-zip", released.study, released.number)
    with pytest.raises(ObjectMismatch, match="longer than"):
        body_of(response)


def test_a_superseded_release_is_not_sent_as_one_zip(released, researcher):
    released.state = released.State.SUPERSEDED
    with scope(study=released.study), pytest.raises(ResearchError, match="superseded"):
        archives.release_archive(researcher, released)


@pytest.mark.s3
def test_on_s3_the_zip_reads_the_objects_as_they_arrive(settings, released, researcher, client, tmp_path,
                                                         monkeypatch):
    if settings.STORAGE_BACKEND != "s3":
        pytest.skip("needs the S3 gateway: CERES_STORAGE=s3 and infra/swift/start.sh")
    store = storages["releases"]

    def whole(*args, **kwargs):
        raise AssertionError("the ZIP must not open an object whole (django-storages spools it)")

    monkeypatch.setattr(type(store), "_open", whole)
    response = post_zip(client, researcher, "research-release-zip", released.study, released.number)
    body = body_of(response)
    assert len(body) == int(response["Content-Length"])
    _, unzipped = unzip(body, tmp_path)
    assert verify(unzipped / f"{released.study.code}-release-0001", tmp_path) == 0


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.slow
def test_a_1_gb_zip_streams_with_flat_memory(tmp_path):
    """1 GiB (a sparse file: nothing written to disk) through the same code path as a download: the storage read
    in blocks, checked, into the ZIP, out of a ``StreamingHttpResponse``."""
    size = 1 << 30
    store = FileSystemStorage(location=str(tmp_path / "store"))
    (tmp_path / "store").mkdir()
    with open(tmp_path / "store" / "big.bin", "wb") as sparse:
        sparse.truncate(size)
    hasher, zeros = hashlib.sha256(), bytes(1 << 20)
    for _ in range(size >> 20):
        hasher.update(zeros)
    member = archives.Member("episode-000000/videos/big.bin", "big.bin", 0, size, hasher.hexdigest())
    archive = archives.build([member], folder="S-release-0001", store=store)
    response = StreamingHttpResponse(archive.chunks(), content_type="application/zip")
    before, peak, sent = _rss(), 0, 0
    for count, chunk in enumerate(response.streaming_content):
        sent += len(chunk)
        if count % 64 == 0:
            peak = max(peak, _rss())
    peak = max(peak, _rss())
    assert sent == archive.size > size
    assert peak - before < 64 << 20, f"memory grew by {(peak - before) >> 20} MiB"
