"""The demo starts again after its demonstrator withdrew: seeding skips what no longer applies and says so.
It used to stop in ``demo_recordings`` ("the consent date ... is not after the withdrawal"), so
``infra/run.sh`` never reached the servers."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from django_scopes import scope

from portal.recordings.demo import demo_registry
from portal.recordings.models import Recording
from portal.research.services.withdrawals import withdraw_consent
from portal.studies.models import ConsentEvent


def _withdraw(demo) -> ConsentEvent:
    registry = demo_registry()
    with scope(study=demo):
        return withdraw_consent(registry.coordinator, registry.demonstrator, withdrawal_date=timezone.localdate(),
                                reason="asked to leave the demo")


def _events(demo) -> list[tuple[str, str]]:
    with scope(study=demo):
        return list(ConsentEvent.objects.order_by("pk").values_list("kind", "event_date"))


def test_seeding_after_a_withdrawal_skips_new_recordings_and_says_so(demo):
    withdrawal = _withdraw(demo)
    before = _events(demo)
    out = io.StringIO()
    call_command("demo_setup", stdout=io.StringIO())
    call_command("demo_recordings", stdout=out)
    reason = f"demonstrator {demo_registry().demonstrator.designator} withdrew consent on {withdrawal.event_date}"
    lines = out.getvalue().splitlines()
    assert lines[0] == (f"The demo {reason}: recordings not ingested yet are skipped (they would not be covered), "
                        "the others stay as they are.")
    assert lines[1:5] == [f"demo-kitchen-000{n}: skipped ({reason})" for n in range(1, 5)]
    with scope(study=demo):
        assert not Recording.objects.exists()
    assert _events(demo) == before, "seeding gives no consent again and records nothing"
    registry = demo_registry()
    assert (registry.consent, registry.withdrawal) == (None, withdrawal)


def test_demo_capture_after_a_withdrawal_says_why_it_writes_nothing(demo, tmp_path):
    withdrawal = _withdraw(demo)
    with pytest.raises(CommandError, match=rf"^no capture can be made for the demo study: demonstrator "
                                           rf"\S+ withdrew consent on {withdrawal.event_date}$"):
        call_command("demo_capture", str(tmp_path / "out" / "capture.zip"), stdout=io.StringIO())
    assert not (tmp_path / "out").exists()

