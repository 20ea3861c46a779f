"""seed_scale: the numbers asked for, an audit chain that verifies, refusals that say why; record_many chains
exactly like record."""

from __future__ import annotations

import io
import itertools

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.audit.services import Entry, record, record_many, verify_chain
from portal.recordings.models import Episode, Recording, RecordingLog
from portal.releases.models import Approval, ReleaseRequest
from portal.releases.services import manifest
from portal.studies.models import Demonstrator, Headset, Study

pytestmark = pytest.mark.django_db


def _seed(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_scale", *args, stdout=out)
    return out.getvalue()


def test_seeds_the_numbers_asked_for_with_a_chain_that_verifies():
    before = AuditEvent.objects.count()
    output = _seed("--study", "year", "--episodes", "400", "--audit-events", "6000", "--headsets", "7",
                   "--demonstrators", "30", "--release-requests", "9", "--password", "seed-password-1")
    study = Study.objects.get(code="year")
    with scope(study=study):
        recordings = Recording.objects.all()
        states = set(recordings.values_list("state", flat=True))
        assert recordings.count() == 400 and Headset.objects.count() == 7 and Demonstrator.objects.count() == 30
        # Every state a year holds, and an episode exactly for those that reached export.
        assert {"verified", "quarantined", "rejected", "duplicate", "failed", "exported"} <= states
        with_episode = recordings.filter(state__in=["running", "exported", "verified"]).count()
        assert Episode.objects.count() == with_episode
        assert list(Episode.objects.order_by("episode_index").values_list("episode_index", flat=True)) == list(
            range(with_episode))
        assert RecordingLog.objects.filter(recording__state="verified").exists()
        # A year of history, not one minute: the list's order spans months.
        newest, oldest = recordings.order_by("-created_at")[0], recordings.order_by("created_at")[0]
        assert (newest.created_at - oldest.created_at).days > 300
        # Release requests of verified episodes, with the digest of what they froze and the approvals given.
        requests_ = ReleaseRequest.objects.order_by("number")
        assert list(requests_.values_list("number", flat=True)) == list(range(1, 10))
        assert dict(requests_.values_list("state").annotate(n=Count("pk")).order_by()) == {
            "draft": 3, "awaiting_approval": 3, "rejected": 3}
        for request in requests_:
            assert request.items.count() == request.episode_count >= 1
            assert not request.items.exclude(episode__receipt_status="verified").exists()
            assert request.manifest_sha256 == manifest.section_digest(request)
        assert Approval.objects.filter(request__state="awaiting_approval").count() == 2
        assert not Approval.objects.exclude(request__state="awaiting_approval").exists()
        assert AuditEvent.objects.filter(action="release.requested").count() == 9
        assert AuditEvent.objects.filter(action="release.approval_given").count() == 2
    assert AuditEvent.objects.count() - before == 6000
    assert verify_chain() == (AuditEvent.objects.count(), None)
    assert "400 recordings" in output and "9 release requests" in output and "year-coordinator" in output
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert "audit chain intact" in out.getvalue()


def test_refuses_a_study_that_exists_and_too_few_events():
    _seed("--study", "twice", "--episodes", "5", "--audit-events", "400", "--headsets", "2", "--demonstrators", "3",
          "--password", "seed-password-2")
    with pytest.raises(CommandError, match="study 'twice' already exists"):
        _seed("--study", "twice", "--episodes", "5", "--audit-events", "400")
    with pytest.raises(CommandError, match=r"fewer than the \d+ events these recordings"):
        _seed("--study", "small", "--episodes", "50", "--audit-events", "10", "--headsets", "2",
              "--demonstrators", "3")
    assert not Study.objects.filter(code="small").exists()  # nothing half-written


def test_record_many_chains_exactly_like_record():
    record("tester", "first.single")
    appended = record_many(Entry("tester", "bulk.event", after={"n": n}) for n in range(7))
    record("tester", "last.single")
    assert appended == 7
    events = list(AuditEvent.objects.order_by("seq"))
    assert [e.action for e in events[-9:]] == ["first.single", *["bulk.event"] * 7, "last.single"]
    assert [e.after for e in events[-8:-1]] == [{"n": n} for n in range(7)]
    assert all(e.prev_hash == p.hash for p, e in itertools.pairwise(events))
    assert all(e.hash == e.compute_hash() for e in events)
    assert verify_chain()[1] is None
