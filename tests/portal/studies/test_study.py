"""The study's own settings (services/study.py): status, audio policy, data-use agreement versions and the
approval second factor, each an audited change."""

from __future__ import annotations

import pytest

from portal.audit.models import AuditEvent
from portal.studies.exceptions import RegistryError
from portal.studies.services.study import (
    current_data_use_agreement,
    publish_data_use_agreement,
    set_audio_policy,
    set_study_status,
)


def test_status_changes_are_audited(study, coordinator):
    # A closed study's recordings are quarantined: tests/portal/recordings/test_ingest.py.
    set_study_status(coordinator, study, "closed")
    assert study.status == "closed"
    event = AuditEvent.objects.get(action="study.status_changed")
    assert (event.before["status"], event.after["status"]) == ("active", "closed")


def test_no_way_back_to_draft(study, coordinator):
    with pytest.raises(RegistryError, match="cannot go from active to draft"):
        set_study_status(coordinator, study, "draft")
    with pytest.raises(RegistryError, match="unknown study status"):
        set_study_status(coordinator, study, "paused")


def test_audio_policy_changes_are_audited(study, coordinator):
    set_audio_policy(coordinator, study, "retain-days", retain_days=30)
    assert study.audio_policy_label == "retain-days 30"
    event = AuditEvent.objects.get(action="study.audio_policy_changed")
    assert event.before["audio_policy"] == "discard"
    assert (event.after["audio_policy"], event.after["audio_retain_days"]) == ("retain-days", 30)


@pytest.mark.parametrize(("policy", "days", "fault"), [
    ("retain-days", None, "needs a number of days"),
    ("retain-days", 0, "needs a number of days"),
    ("retain", 30, "only to the retain-days policy"),
    ("forever", None, "unknown audio policy"),
])
def test_bad_audio_policies_are_refused(study, coordinator, policy, days, fault):
    with pytest.raises(RegistryError, match=fault):
        set_audio_policy(coordinator, study, policy, retain_days=days)


def test_data_use_agreement_versions(study, coordinator):
    assert current_data_use_agreement(study) is None
    first = publish_data_use_agreement(coordinator, study, text="Use for research only.")
    second = publish_data_use_agreement(coordinator, study, text="Use for research only; no re-identification.")
    assert (first.version, second.version) == (1, 2)
    assert current_data_use_agreement(study) == second
    assert len(second.sha256) == 64
    with pytest.raises(RegistryError, match="identical to the current data-use agreement v2"):
        publish_data_use_agreement(coordinator, study, text="Use for research only; no re-identification.")
    assert AuditEvent.objects.filter(action="study.data_use_agreement_published").count() == 2


def test_the_approval_second_factor_setting_is_a_coordinators_audited_change(make_study, make_user, client):
    study = make_study("twofa")
    coordinator = make_user("twofa-coord", study, ["coordinator"])
    client.force_login(coordinator)
    response = client.post(f"/studies/{study.code}/settings/approval-second-factor/",
                           {"approval_second_factor": "on"})
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.approval_second_factor is True
    event = AuditEvent.objects.get(action="study.approval_second_factor_changed")
    assert (event.before["approval_second_factor"], event.after["approval_second_factor"]) == (False, True)
    client.post(f"/studies/{study.code}/settings/approval-second-factor/", {})
    study.refresh_from_db()
    assert study.approval_second_factor is False
