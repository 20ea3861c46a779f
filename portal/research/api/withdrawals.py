"""The consent events of a study (``/api/studies/<study_code>/consent-events/``): the registry's view set, routed
from here so that a withdrawal posted to it starts where every consent withdrawal starts,
``services.withdrawals.withdraw_consent`` (the registry records it, raw audio is purged, the withdrawal job is
opened, in one transaction)."""

from __future__ import annotations

from portal.research.services import withdrawals
from portal.studies import api as studies_api
from portal.studies.models import ConsentEvent


class ConsentEventViewSet(studies_api.ConsentEventViewSet):
    __doc__ = studies_api.ConsentEventViewSet.__doc__

    def withdraw(self, data: dict) -> ConsentEvent:
        return withdrawals.withdraw_consent(self.request.user, data["demonstrator"],
                                            withdrawal_date=data["event_date"], reason=data.get("reason", ""))
