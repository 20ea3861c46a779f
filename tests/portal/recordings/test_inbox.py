"""The inbox polled by Celery beat: a folder per study on local storage, a bucket prefix on S3."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django_scopes import scope

from portal.recordings.models import Recording
from portal.recordings.services.inbox import poll_inbox

pytestmark = pytest.mark.django_db


def test_inbox_ingests_ready_entries_once(reg, make_capture, settings):
    folder = make_capture(reg.claims())
    archive = make_capture(reg.claims(), zip_output=True)
    if settings.STORAGE_BACKEND == "s3":
        with archive.open("rb") as stream:
            storages["captures"].save(f"inbox/{reg.study.code}/{archive.name}", ContentFile(stream.read()))
        shutil.rmtree(folder)
        expected = 1
    else:
        inbox = Path(settings.CERES_INBOX_DIR) / reg.study.code
        inbox.mkdir(parents=True)
        shutil.move(folder, inbox / folder.name)
        shutil.move(archive, inbox / archive.name)
        fresh = make_capture(reg.claims())
        shutil.move(fresh, inbox / fresh.name)
        os.utime(inbox / fresh.name)  # just arrived: left for the next poll
        for entry in (inbox / folder.name, inbox / archive.name):
            os.utime(entry, (0, 0))
        expected = 2
    ingested = poll_inbox(min_age_seconds=30)
    assert len(ingested) == expected
    assert {r.state for r in ingested} == {Recording.State.QUEUED}
    assert poll_inbox(min_age_seconds=30) == []
    with scope(study=reg.study):
        assert Recording.objects.filter(via="inbox").count() == expected
    if settings.STORAGE_BACKEND == "local":
        assert sorted(p.name for p in inbox.iterdir() if not p.name.startswith(".")) == [fresh.name]


def test_hostile_inbox_entries_are_rejected_and_removed(reg, settings, tmp_path):
    settings.CERES_MAX_SOURCE_BYTES = 1024
    if settings.STORAGE_BACKEND == "s3":
        name = f"inbox/{reg.study.code}/big.zip"
        storages["captures"].save(name, ContentFile(b"x" * 4096))
        expected = "larger than the limit"
    else:
        inbox = Path(settings.CERES_INBOX_DIR) / reg.study.code
        inbox.mkdir(parents=True)
        (inbox / "link.zip").symlink_to(tmp_path)
        os.utime(inbox / "link.zip", (0, 0), follow_symlinks=False)
        expected = "may not be a symbolic link"
    [recording] = poll_inbox(min_age_seconds=30)
    assert recording.state == Recording.State.REJECTED and expected in recording.reason
    assert poll_inbox(min_age_seconds=30) == []
    assert tmp_path.exists()
