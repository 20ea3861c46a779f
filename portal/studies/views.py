from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.studies.models import Headset


@study_view(Role.COORDINATOR, Role.ETHICS_OFFICER, Role.RESEARCHER)
def overview(request: HttpRequest, study) -> HttpResponse:
    return render(request, "studies/overview.html", {
        "study": study,
        "roles": request.study_roles,
        "headset_count": Headset.objects.count(),
    })
