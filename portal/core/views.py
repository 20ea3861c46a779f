from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django_scopes import scope

from portal.access.models import Role
from portal.access.permissions import roles_by_study
from portal.core import dashboard as panels


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """One panel per (study, role) the user holds; honest empty states when there is nothing yet."""
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
        "role_labels": dict(Role.choices),
    })


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
