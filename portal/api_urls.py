"""The REST API: one router for every app's view sets."""

from rest_framework.routers import DefaultRouter

router = DefaultRouter()

urlpatterns = router.urls
