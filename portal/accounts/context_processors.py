from portal.access.permissions import navigation
from portal.accounts.services import awaiting_second_factor


def header(request):
    """The studies and roles shown in the navigation bar; signed in with the password only, nothing but that the
    second factor is awaited (the header names no study, nor anything else, before the second factor)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    if awaiting_second_factor(user):
        return {"awaiting_second_factor": True}
    return {"nav_studies": navigation(request)}
