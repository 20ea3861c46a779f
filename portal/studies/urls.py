from django.urls import path

from portal.studies import views

urlpatterns = [
    path("", views.overview, name="study-overview"),
]
