from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "portal.notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self):
        from portal.access.permissions import add_navigation_column
        from portal.notifications.services import unread_per_user

        add_navigation_column("unread_notifications", unread_per_user)  # the header's badge
