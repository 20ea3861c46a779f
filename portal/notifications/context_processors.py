from portal.access.permissions import navigation
from portal.notifications.services import unread_count


class _Unread:
    """Read once, when a page first shows the badge (pages that show no header, such as the admin's, ask
    nothing): from the navigation's query, which counts them on each of its rows, or (a user holding no grant,
    so no row) with a count of its own."""

    def __init__(self, request):
        self.request, self.value = request, None

    def __call__(self) -> int:
        if self.value is None:
            studies = navigation(self.request)
            self.value = (next(iter(studies)).unread_notifications if studies
                          else unread_count(self.request.user))
        return self.value


def unread(request):
    """The header's badge: the signed-in user's unread messages (one indexed count)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"unread_notifications": _Unread(request)}
