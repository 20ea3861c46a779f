"""The research fixtures (registry, verified episodes, releases, researchers), and a way to deliver the emails
that were queued, as the worker does."""

from __future__ import annotations

import pytest

from portal.notifications import services
from tests.portal.research import conftest as research

(make_capture, make_registry, private_storage, reg, sent_tasks, stored_objects, unique_code, worker, team,
 verified_factory, verified, make_request, agreement, make_released, make_researcher) = (
    research.make_capture, research.make_registry, research.private_storage, research.reg, research.sent_tasks,
    research.stored_objects, research.unique_code, research.worker, research.team, research.verified_factory,
    research.verified, research.make_request, research.agreement, research.make_released,
    research.make_researcher)


@pytest.fixture
def deliver_queued(sent_tasks):
    """Run every ``notifications.deliver`` queued so far (once each, like the worker); returns how many ran."""
    done: set[int] = set()

    def deliver() -> int:
        queued = [args[0] for name, args in sent_tasks if name == "notifications.deliver" and args[0] not in done]
        for notification_id in queued:
            services.deliver(notification_id)
            done.add(notification_id)
        return len(queued)

    return deliver
