"""The leased-job module: one lease setting per kind of job, a live lease refused, a run-out one taken over, the
attempts counted, the heartbeat renewing at most so often, the lease given back. The jobs' own tests (the worker
faults and the kill drill) show the same through real workers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from portal.core import leases
from portal.core.errors import LeaseBusy
from portal.fixity.models import FixityRun
from portal.releases.models import Release


def test_every_leased_job_names_a_lease_setting_of_its_own(settings):
    models = [model for model in apps.get_models() if issubclass(model, leases.LeasedJob)]
    assert {model.__name__ for model in models} == {"Recording", "Release", "Dataset", "Withdrawal", "FixityRun",
                                                            "FaceDetection"}
    names = [model.LEASE_SETTING for model in models]
    assert len(set(names)) == len(names)
    for model in models:
        assert isinstance(getattr(settings, model.LEASE_SETTING), int) and leases.seconds(model) >= 1
        assert model.LEASE_JOB
    assert leases.seconds(FixityRun) == 3600


@pytest.mark.django_db
def test_a_live_lease_is_refused_and_one_run_out_is_taken_over(settings):
    settings.CERES_FIXITY_LEASE_SECONDS = 30
    run = FixityRun.objects.create(kind=FixityRun.Kind.FULL, requested_by="test")
    now = timezone.now()
    assert leases.take(run, now) == {"lease_until": now + timedelta(seconds=30)}
    with pytest.raises(LeaseBusy, match="another fixity run attempt holds the lease for 20 s more") as busy:
        leases.take(run, now + timedelta(seconds=10))
    assert busy.value.seconds_left == 20
    assert run.lease_until == now + timedelta(seconds=30)  # refused: unchanged
    later = now + timedelta(seconds=30)
    assert leases.seconds_left(run, later) == 0
    assert leases.take(run, later) == {"lease_until": later + timedelta(seconds=30)}


def test_an_attempt_is_counted_where_the_row_counts_them(settings):
    settings.CERES_RELEASE_LEASE_SECONDS = 5
    release = Release(attempts=2)
    now = timezone.now()
    assert leases.take(release, now) == {"lease_until": now + timedelta(seconds=5), "attempts": 3}
    assert release.attempts == 3


@pytest.mark.django_db
def test_the_heartbeat_renews_with_the_progress_and_the_lease_is_given_back(settings, monkeypatch):
    settings.CERES_FIXITY_LEASE_SECONDS = 30
    run = FixityRun.objects.create(kind=FixityRun.Kind.FULL, requested_by="test")
    clock = [100.0]
    monkeypatch.setattr(leases.time, "monotonic", lambda: clock[0])
    beat = leases.Heartbeat(run, every=60)
    beat(units_checked=1)  # too soon: nothing written
    run.refresh_from_db()
    assert (run.lease_until, run.units_checked) == (None, 0)
    beat(force=True, units_checked=2)
    run.refresh_from_db()
    assert run.units_checked == 2 and 29 < leases.seconds_left(run) <= 30
    clock[0] += 60
    beat(units_checked=3)
    run.refresh_from_db()
    assert run.units_checked == 3
    leases.give_back(run, error=leases.retry_note(OSError("gateway down"), 4))
    run.refresh_from_db()
    assert run.lease_until is None and run.error == "storage error, retrying in 4 s: gateway down"
