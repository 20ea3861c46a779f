"""The audit view in the browser: an ethics officer opens a recording, follows "History from upload to release" to
the audit log filtered on it (the recording's, its episode's and its release request's events, nothing else),
opens one event and goes back to that object's own events, and sees the chain's status; screenshots saved.
Seeded data on the embedded defaults: no worker is needed."""

from __future__ import annotations

import re

import pytest
from django_scopes import scope
from playwright.sync_api import expect

from portal.audit.models import AuditEvent
from portal.audit.services import run_verification, write_checkpoint
from portal.audit.study_log import events
from portal.demo.seeding import seed_study
from portal.releases.audit_history import recording_history
from portal.releases.models import ReleaseItem

PASSWORD = "audit-view-" * 2


@pytest.mark.django_db(transaction=True)
def test_an_ethics_officer_filters_one_recordings_history(page, login, shot, settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "releases": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path / "releases")}}}
    seeded = seed_study("auditview", episodes=40, headsets=4, demonstrators=6, release_requests=6, password=PASSWORD)
    checkpoint = write_checkpoint()
    run_verification("task")
    with scope(study=seeded.study):
        item = ReleaseItem.objects.select_related("episode__recording", "request").order_by("pk").first()
        recording = item.episode.recording
        expected = list(events(seeded.study).filter(recording_history(recording)).order_by("-seq")
                        .values_list("seq", flat=True))
    assert AuditEvent.objects.filter(seq__in=expected, target_type="releases.releaserequest").exists()

    login(page, seeded.logins["ethics"], PASSWORD)
    page.goto(f"/studies/auditview/recordings/{recording.uid}/")
    page.click("#recording-history")
    expect(page).to_have_url(re.compile(rf"/studies/auditview/audit/\?recording={recording.uid}$"))
    expect(page.locator("#recording-history")).to_contain_text("from upload to release")
    rows = page.locator("#events tbody tr")
    expect(rows).to_have_count(len(expected))
    assert [int(seq) for seq in rows.evaluate_all("rows => rows.map(row => row.dataset.seq)")] == expected
    objects = set(page.locator("#events tbody td:nth-child(5)").all_inner_texts())
    assert all(text.split()[0] in ("recordings.recording", "recordings.episode", "releases.releaserequest")
               for text in objects)
    expect(page.locator("#last-verification")).to_contain_text("intact")
    expect(page.locator("#last-checkpoint")).to_contain_text(f"seq {checkpoint.seq} at")
    export = page.locator("#export")
    assert export.get_attribute("href") == f"/studies/auditview/audit/export.csv?recording={recording.uid}"
    shot(page, "audit-recording-history")

    # One event in full, then that object's own events, which offer the whole history again.
    page.locator("#events tbody tr").last.locator("td:first-child a").click()
    expect(page.locator("h1")).to_contain_text(f"Audit event {expected[-1]}")
    expect(page.locator("#event")).to_contain_text("recording.received")
    shot(page, "audit-event")
    page.click("#object-history")
    expect(page).to_have_url(re.compile(r"target_type=recordings.recording&target_id=\d+"))
    expect(page.locator("#wider")).to_contain_text("The whole history of recording")
    own = page.locator("#events tbody tr")
    assert 0 < own.count() < len(expected)

    # The filters in the form: the recording's uid and an action prefix narrow it further.
    page.goto("/studies/auditview/audit/")
    page.fill("#id_recording", str(recording.uid))
    page.fill("#id_action", "release.*")
    page.click("#filters button[type=submit]")
    narrowed = page.locator("#events tbody tr")
    expect(narrowed.first).to_contain_text("release.")
    assert all("release." in text for text in narrowed.all_inner_texts())
    shot(page, "audit-recording-release-events")
