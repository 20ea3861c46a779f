from portal.access.permissions import roles_by_study
from portal.accounts.services import awaiting_second_factor
from portal.fixity.services import alerts


def navigation(request):
    """The studies and roles shown in the navigation bar, and the open alerts shown on top of the dashboard and of
    a study's pages (counted in the navigation's own query)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    if awaiting_second_factor(user):
        # Signed in with the password only: the header names no study (nor anything else) before the second factor.
        return {"awaiting_second_factor": True}
    nav = roles_by_study(user, open_alerts=alerts.open_alerts_per_study())
    return {"nav_studies": nav, "alert_banner": alerts.banner(nav, request)}
