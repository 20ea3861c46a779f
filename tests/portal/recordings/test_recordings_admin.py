"""The recordings admin: its lists are read-only."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.recordings.services.ingest import ingest_path

pytestmark = pytest.mark.django_db


def test_admin_lists_are_read_only(client, reg, make_capture, django_user_model):
    with scope(study=reg.study):
        ingest_path(reg.coordinator, reg.study, make_capture(reg.claims()))
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-" * 4))
    for model in ("recordings_recording", "recordings_episode", "recordings_purgereceipt", "recordings_verification",
                  "fixity_alert"):
        assert client.get(reverse(f"admin:{model}_changelist")).status_code == 200
    assert client.get(reverse("admin:recordings_recording_add")).status_code == 403
