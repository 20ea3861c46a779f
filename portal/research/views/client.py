"""``/client/``: how to install ``ceres-pull``, the researchers' client, and its wheel, for anyone (no login: pip
fetches it with no session, and it holds nothing of any study)."""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseNotFound
from django.shortcuts import render
from django.views.decorators.http import require_safe

from portal.research.services import client


@require_safe
def client_page(request: HttpRequest) -> HttpResponse:
    return render(request, "research/client.html", {**client.commands(request), "wheel_name": client.wheel_name(),
                                                    "available": client.wheel_path() is not None})


@require_safe
def client_wheel(request: HttpRequest, filename: str) -> HttpResponse:
    name = client.wheel_name()
    if filename != name:
        return HttpResponseNotFound(f"{filename}: not a file of this portal; the client's wheel here is "
                                    f"/client/{name}\n", content_type="text/plain; charset=utf-8")
    path = client.wheel_path()
    if path is None:
        return HttpResponseNotFound(f"{name} has not been built on this portal yet; its operators build it with "
                                    f"'python manage.py client_wheel'\n", content_type="text/plain; charset=utf-8")
    return FileResponse(path.open("rb"), as_attachment=True, filename=name, content_type="application/zip")
