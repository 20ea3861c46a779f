from django.urls import path

from portal.studies import audit_views as views

urlpatterns = [
    path("", views.audit_list, name="audit-list"),
    path("export.csv", views.audit_export, name="audit-export"),
    path("<uint:seq>/", views.audit_event, name="audit-event"),
]
