from django.urls import reverse
from django_scopes import scopes_disabled


class AdminScopeMiddleware:
    """The admin is for staff and spans studies: it runs with scopes disabled.

    Everything else runs without a scope until a study view enters one, so an unscoped read of
    study data fails loudly.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        self.admin_prefix = reverse("admin:index")

    def __call__(self, request):
        if request.path.startswith(self.admin_prefix):
            with scopes_disabled():
                return self.get_response(request)
        return self.get_response(request)
