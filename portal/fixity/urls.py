from django.urls import path

from portal.fixity import views

# Under studies/<study_code>/.
urlpatterns = [
    path("alerts/", views.alert_list, name="alert-list"),
    path("alerts/<int:pk>/", views.alert_detail, name="alert-detail"),
    path("alerts/<int:pk>/acknowledge/", views.acknowledge_alert, name="alert-acknowledge"),
    path("alerts/<int:pk>/resolve/", views.resolve_alert, name="alert-resolve"),
    path("fixity/", views.run_list, name="fixity-runs"),
    path("fixity/<int:run_id>/", views.run_detail, name="fixity-run"),
]
