from portal.access.permissions import roles_by_study


def navigation(request):
    """The studies and roles shown in the navigation bar."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"nav_studies": roles_by_study(user)}
