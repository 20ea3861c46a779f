from django.urls import path

from portal.fixity import views

# Under studies/<study_code>/.
urlpatterns = [
    path("alerts/", views.alert_list, name="alert-list"),
    path("alerts/<uint:pk>/", views.alert_detail, name="alert-detail"),
    path("alerts/<uint:pk>/acknowledge/", views.acknowledge_alert, name="alert-acknowledge"),
    path("alerts/<uint:pk>/resolve/", views.resolve_alert, name="alert-resolve"),
    path("fixity/", views.run_list, name="fixity-runs"),
    path("fixity/<uint:run_id>/", views.run_detail, name="fixity-run"),
]
