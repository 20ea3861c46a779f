"""The study's audit view beyond permissions: the study's events newest first and no other study's, each filter,
a recording's history from upload to release and a demonstrator's from consent to withdrawal, one event in full,
the CSV export (every matching row, streamed in chunks, itself audited), the chain's status, the API."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_scopes import scope

from portal.audit import services, study_log
from portal.audit.models import AuditEvent
from portal.audit.services import record, run_verification, write_checkpoint
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.services.demonstrators import create_demonstrator
from tests.portal.audit.tamper import raw

pytestmark = pytest.mark.django_db


def _seqs(page: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<tr data-seq="(\d+)">', page)]


def _page(client, study, **query) -> str:
    response = client.get(reverse("audit-list", args=[study.code]), query)
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def two_studies(make_study, make_user):
    alpha, beta = make_study("alpha"), make_study("beta")
    coordinator = make_user("coord", alpha, ["coordinator"])
    officer = make_user("officer", alpha, ["ethics_officer"])
    make_user("beta-coord", beta, ["coordinator"])
    return alpha, beta, coordinator, officer


def test_the_studys_events_newest_first_and_no_other_studys(client, two_studies):
    alpha, beta, coordinator, officer = two_studies
    record("someone", "test.alpha", alpha)
    record("someone", "test.beta", beta)
    mine = list(AuditEvent.objects.filter(study_id=alpha.pk).order_by("-seq").values_list("seq", flat=True))
    for user in (coordinator, officer):
        client.force_login(user)
        assert _seqs(_page(client, alpha)) == mine
    assert not AuditEvent.objects.filter(seq__in=mine, study_id=beta.pk).exists()
    assert "test.beta" not in _page(client, alpha)


def test_filters_by_actor_action_object_and_time(client, two_studies, monkeypatch):
    alpha, _, coordinator, _ = two_studies
    client.force_login(coordinator)
    earlier = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    monkeypatch.setattr(services.timezone, "now", lambda: earlier)
    first = record("ada", "sample.made", alpha, after={"n": 1})
    monkeypatch.undo()
    second = record("ada", "sample.checked", alpha)
    third = record("bob", "other.done", alpha)

    assert _seqs(_page(client, alpha, actor="ada")) == [second.seq, first.seq]
    assert _seqs(_page(client, alpha, action="sample.made")) == [first.seq]
    assert _seqs(_page(client, alpha, action="sample.*")) == [second.seq, first.seq]
    assert _seqs(_page(client, alpha, action="sample")) == []  # exact unless it ends in *
    assert _seqs(_page(client, alpha, since="2026-03-01", until="2026-03-01")) == [first.seq]
    today = timezone.localdate()
    assert _seqs(_page(client, alpha, since=today.isoformat(), actor="bob")) == [third.seq]
    assert _seqs(_page(client, alpha, until=(today - timedelta(days=1)).isoformat(), actor="bob")) == []
    study_events = _seqs(_page(client, alpha, target_type="studies.study", target_id=str(alpha.pk)))
    assert {first.seq, second.seq, third.seq} <= set(study_events)
    page = _page(client, alpha, target_id="7")
    assert "An object id needs its type." in page and _seqs(page) == []


def test_each_event_links_to_its_objects_history_and_opens_in_full(client, two_studies):
    alpha, beta, coordinator, _ = two_studies
    client.force_login(coordinator)
    event = record("ada", "sample.made", alpha, before={"state": "old"}, after={"state": "new", "ünï": "cödé"})
    page = _page(client, alpha, action="sample.made")
    history = f'href="/studies/alpha/audit/?target_type=studies.study&amp;target_id={alpha.pk}"'
    assert history in page
    detail = client.get(reverse("audit-event", args=["alpha", event.seq])).content.decode()
    assert "&quot;state&quot;: &quot;new&quot;" in detail and "cödé" in detail and event.hash in detail
    assert "HMAC-SHA256 with the audit key" in detail
    other = record("ada", "sample.made", beta)
    assert client.get(reverse("audit-event", args=["alpha", other.seq])).status_code == 404


def test_a_recordings_history_from_upload_to_release(client, reg, verified, make_request):
    """The recording's events, its episode's, and those of the release request holding it, less the request's
    inspection of the other episode; nothing of the other recording."""
    mine, other = verified(2)
    request = make_request([mine, other])
    client.force_login(reg.ethics)
    page = client.get(reverse("audit-list", args=[reg.study.code]), {"recording": str(mine.recording.uid)})
    shown = AuditEvent.objects.filter(seq__in=_seqs(page.content.decode()))
    targets = {(e.target_type, e.target_id) for e in shown}
    assert targets == {("recordings.recording", str(mine.recording.pk)), ("recordings.episode", str(mine.pk)),
                       ("releases.releaserequest", str(request.pk))}
    actions = [e.action for e in shown.order_by("seq")]
    assert actions[0] == "recording.received" and "episode.verified" in actions
    assert {"release.requested", "release.submitted"} <= set(actions)
    inspections = [e.after["episode"] for e in shown if e.action == "release.episode_inspected"]
    assert inspections == [mine.folder]
    assert "from upload to release" in page.content.decode()


def test_a_demonstrators_history_from_consent_to_withdrawal(client, reg):
    with scope(study=reg.study):
        other = create_demonstrator(reg.coordinator, reg.study)
        withdraw_consent(reg.coordinator, reg.demonstrator, withdrawal_date=date.today(), reason="asked to leave")
    client.force_login(reg.coordinator)
    page = client.get(reverse("audit-list", args=[reg.study.code]), {"demonstrator": reg.demonstrator.designator})
    shown = AuditEvent.objects.filter(seq__in=_seqs(page.content.decode())).order_by("seq")
    assert [e.action for e in shown] == ["demonstrator.created", "consent.given", "consent.withdrawn"]
    assert other.designator not in page.content.decode()
    # From one of its events, the page offers the demonstrator's whole history.
    consent = shown.get(action="consent.given")
    own = _page(client, reg.study, target_type=consent.target_type, target_id=consent.target_id)
    assert f'href="/studies/{reg.study.code}/audit/?demonstrator={reg.demonstrator.designator}"' in own
    unknown = _page(client, reg.study, demonstrator="no-such-one")
    assert "No demonstrator of this study has this designator." in unknown


def test_the_recording_and_demonstrator_pages_link_to_their_history(client, reg, verified):
    episode = verified(1)[0]
    client.force_login(reg.coordinator)
    recording = client.get(reverse("recording-detail", args=[reg.study.code, episode.recording.uid])).content.decode()
    assert f'href="/studies/{reg.study.code}/audit/?recording={episode.recording.uid}"' in recording
    demonstrator = client.get(reverse("study-demonstrator", args=[reg.study.code, reg.demonstrator.pk]))
    assert f'?demonstrator={reg.demonstrator.designator}"' in demonstrator.content.decode()


def _csv(response) -> list[dict]:
    assert response.streaming and response["Content-Type"] == "text/csv; charset=utf-8"
    assert re.fullmatch(r'attachment; filename="audit-alpha-\d{8}-\d{6}\.csv"', response["Content-Disposition"])
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_csv_export_has_every_matching_event_read_in_chunks_and_is_audited(client, two_studies, monkeypatch):
    alpha, _, coordinator, _ = two_studies
    monkeypatch.setattr(study_log, "EXPORT_CHUNK", 3)  # many chunks for a few events
    made = [record("ada", "sample.made", alpha, after={"n": n}) for n in range(8)]
    record("ada", "=HYPERLINK(\"http://evil\")", alpha)  # a label a spreadsheet would run
    client.force_login(coordinator)
    rows = _csv(client.get(reverse("audit-export", args=["alpha"]), {"action": "sample.made"}))
    assert [int(row["seq"]) for row in rows] == [event.seq for event in reversed(made)]
    first = rows[-1]
    assert (first["actor"], first["action"], first["after"], first["hash"]) == \
        ("ada", "sample.made", '{"n": 0}', made[0].hash)
    assert first["time"] == made[0].created_at.isoformat(timespec="microseconds")
    everything = _csv(client.get(reverse("audit-export", args=["alpha"])))
    assert len(everything) == AuditEvent.objects.filter(study_id=alpha.pk).count() - 1  # not its own event
    assert "'=HYPERLINK(\"http://evil\")" in {row["action"] for row in everything}
    exported = AuditEvent.objects.filter(action="audit.exported").order_by("seq")
    assert [e.after["filters"] for e in exported] == [{"action": "sample.made"}, {}]
    assert exported.last().actor_label == "coord" and exported.last().study_id == alpha.pk
    bad = client.get(reverse("audit-export", args=["alpha"]), {"recording": "not-a-uid"})
    assert bad.status_code == 400 and "Not a recording" in bad.content.decode()


def test_the_chain_status_shows_the_last_verification_and_checkpoint(client, two_studies):
    alpha, _, coordinator, _ = two_studies
    client.force_login(coordinator)
    page = _page(client, alpha)
    assert "Last full verification:" in page and "never" in page and "none yet" in page
    checkpoint = write_checkpoint()
    run_verification("task")
    page = _page(client, alpha)
    assert "intact" in page and f"seq {checkpoint.seq} at" in page
    raw("DELETE FROM audit_auditevent WHERE seq = %s", [checkpoint.seq])
    run_verification("command")
    page = _page(client, alpha)
    assert f"broken at seq {checkpoint.seq}" in page and "the newest event is missing" in page


def test_the_api_lists_with_the_same_filters_and_reads_one_event(client, two_studies):
    alpha, beta, _, officer = two_studies
    made = record("ada", "sample.made", alpha, after={"n": 1})
    record("ada", "sample.checked", alpha)
    other = record("ada", "sample.made", beta)
    client.force_login(officer)
    listed = client.get("/api/studies/alpha/audit-events/", {"action": "sample.made"}).json()
    assert (listed["count"], [row["seq"] for row in listed["results"]]) == (1, [made.seq])
    assert listed["results"][0] == {"seq": made.seq, "created_at": listed["results"][0]["created_at"], "actor": "ada",
                                    "action": "sample.made", "target_type": "studies.study",
                                    "target_id": str(alpha.pk), "target": str(alpha)}
    one = client.get(f"/api/studies/alpha/audit-events/{made.seq}/").json()
    assert (one["after"], one["hash"], one["hash_version"]) == ({"n": 1}, made.hash, 2)
    assert client.get(f"/api/studies/alpha/audit-events/{other.seq}/").status_code == 404
    bad = client.get("/api/studies/alpha/audit-events/", {"target_id": "3"})
    assert bad.status_code == 400 and "target_id" in bad.json()


def test_the_schema_describes_the_audit_endpoints_and_their_filters():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    base = "/api/studies/{study_code}/audit-events/"
    assert {base, f"{base}{{seq}}/"} <= set(schema["paths"])
    parameters = {p["name"] for p in schema["paths"][base]["get"]["parameters"]}
    assert {"target_type", "target_id", "actor", "action", "since", "until", "recording", "demonstrator",
            "cursor"} <= parameters
    detail = schema["components"]["schemas"]["AuditEvent"]["properties"]
    assert {"before", "after", "hash", "hash_version"} <= set(detail)
