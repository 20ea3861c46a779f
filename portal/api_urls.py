"""The REST API: one router for every app's view sets."""

from rest_framework.routers import DefaultRouter

from portal.accounts import api as accounts_api
from portal.recordings import api as recordings_api
from portal.releases import api as releases_api
from portal.studies import api as studies_api

router = DefaultRouter()
STUDY = r"studies/(?P<study_code>[-a-zA-Z0-9_]+)"
router.register(r"tokens", accounts_api.ApiTokenViewSet, basename="api-token")
router.register(r"studies", studies_api.StudyViewSet, basename="api-study")
router.register(rf"{STUDY}/headsets", studies_api.HeadsetViewSet, basename="api-headset")
router.register(rf"{STUDY}/demonstrators", studies_api.DemonstratorViewSet, basename="api-demonstrator")
router.register(rf"{STUDY}/consent-documents", studies_api.ConsentDocumentViewSet, basename="api-consent-document")
router.register(rf"{STUDY}/consent-events", studies_api.ConsentEventViewSet, basename="api-consent-event")
router.register(rf"{STUDY}/recordings", recordings_api.RecordingViewSet, basename="api-recording")
router.register(rf"{STUDY}/episodes", recordings_api.EpisodeViewSet, basename="api-episode")
router.register(rf"{STUDY}/release-requests", releases_api.ReleaseRequestViewSet, basename="api-release-request")

urlpatterns = router.urls
