from __future__ import annotations

import pytest


@pytest.fixture
def researcher(make_user, study):
    return make_user("res", study, ["researcher"], password="right-password-1")


def events(action: str, **after):
    """Audit events with ``action`` whose ``after`` holds every given key and value."""
    from portal.audit.models import AuditEvent

    found = AuditEvent.objects.filter(action=action).order_by("seq")
    return [event for event in found if all((event.after or {}).get(k) == v for k, v in after.items())]
