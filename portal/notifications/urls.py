from django.urls import path

from portal.notifications import views

urlpatterns = [
    path("", views.inbox, name="notifications"),
    path("<uint:pk>/", views.open_notification, name="notification-open"),
    path("read-all/", views.read_all, name="notifications-read-all"),
    path("email/", views.email_switches, name="notification-email-switches"),
]
