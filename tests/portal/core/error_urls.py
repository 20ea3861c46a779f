"""The portal's URLs plus two that fail on purpose, for the 400 and 500 pages (ROOT_URLCONF in tests)."""

from django.core.exceptions import BadRequest
from django.urls import path

from portal.urls import handler403  # noqa: F401 (handler403 is looked up here)
from portal.urls import urlpatterns as portal_urlpatterns


def bad_request(request):
    raise BadRequest("a malformed request")


def server_error(request):
    raise RuntimeError("a bug on the portal's side")


urlpatterns = [*portal_urlpatterns, path("fail/400/", bad_request), path("fail/500/", server_error)]
