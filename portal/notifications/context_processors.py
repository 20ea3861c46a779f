from portal.notifications.services import unread_count


class _Unread:
    """Counted once, when a page first shows the badge (pages that show no header, such as the admin's, ask
    nothing)."""

    def __init__(self, user):
        self.user, self.value = user, None

    def __call__(self) -> int:
        if self.value is None:
            self.value = unread_count(self.user)
        return self.value


def unread(request):
    """The header's badge: the signed-in user's unread messages (one indexed count)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"unread_notifications": _Unread(user)}
