from portal.access.permissions import navigation
from portal.accounts.services import awaiting_second_factor
from portal.fixity.services import alerts


def alert_banner(request):
    """The open alerts shown on top of the dashboard and of a study's pages, counted in the navigation's own query
    (the ``open_alerts`` column fixity adds to it when it loads); nothing before the second factor."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or awaiting_second_factor(user):
        return {}
    return {"alert_banner": alerts.banner(navigation(request), request)}
