"""Fixtures of the drills: the recording pipeline's and researcher access's (registry, storage, captures, captured
task sends, verified episodes, published releases, the data-use agreement and researchers)."""

from tests.portal.research import conftest as research

(make_capture, make_registry, private_storage, reg, sent_tasks, unique_code, team, verified_factory, verified,
 make_request, agreement, make_released, make_researcher) = (
    research.make_capture, research.make_registry, research.private_storage, research.reg, research.sent_tasks,
    research.unique_code, research.team, research.verified_factory, research.verified, research.make_request,
    research.agreement, research.make_released, research.make_researcher)
