"""The pages that are about a user's roles: the dashboard (one panel per study and role held) and the 403 page
naming the role a study page needs."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_scopes import scope

from portal.access.dashboard import site_studies
from portal.access.models import Role
from portal.access.permissions import RoleRequired, roles_by_study
from portal.core import dashboard as panels


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """One panel per (study, role) the user holds; honest empty states when there is nothing yet.

    Site administrators (staff) also see every study of the portal, read-only, with links to the admin.
    """
    studies = []
    for study, roles in roles_by_study(request.user).items():
        with scope(study=study):
            studies.append({
                "study": study,
                "roles": roles,
                "panels": [panels.build(role, study, request.user) for role in roles],
            })
    return render(request, "core/dashboard.html", {
        "studies": studies,
        "site_studies": site_studies(request.user) if request.user.is_staff else None,
    })


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403 in the portal's layout. For a study page it names the role needed and the roles the user holds."""
    context = {}
    if isinstance(exception, RoleRequired):
        context = {"study": exception.study, "needed": exception.role_labels,
                   "held": [label for value, label in Role.choices if value in exception.held]}
    return render(request, "403.html", context, status=403)
