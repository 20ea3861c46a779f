"""The REST API: one router for every app's view sets."""

from rest_framework.routers import DefaultRouter

from portal.accounts import api as accounts_api
from portal.fixity import api as fixity_api
from portal.recordings import api as recordings_api
from portal.releases import api as releases_api
from portal.research import api as research_api
from portal.studies import api as studies_api
from portal.studies import audit_api

router = DefaultRouter()
STUDY = r"studies/(?P<study_code>[-a-zA-Z0-9_]+)"
router.register(r"tokens", accounts_api.ApiTokenViewSet, basename="api-token")
router.register(r"studies", studies_api.StudyViewSet, basename="api-study")
router.register(rf"{STUDY}/approval-policy", studies_api.ApprovalPolicyViewSet, basename="api-approval-policy")
router.register(rf"{STUDY}/headsets", studies_api.HeadsetViewSet, basename="api-headset")
router.register(rf"{STUDY}/demonstrators", studies_api.DemonstratorViewSet, basename="api-demonstrator")
router.register(rf"{STUDY}/consent-documents", studies_api.ConsentDocumentViewSet, basename="api-consent-document")
router.register(rf"{STUDY}/consent-events", studies_api.ConsentEventViewSet, basename="api-consent-event")
router.register(rf"{STUDY}/recordings", recordings_api.RecordingViewSet, basename="api-recording")
router.register(rf"{STUDY}/episodes", recordings_api.EpisodeViewSet, basename="api-episode")
router.register(rf"{STUDY}/release-requests", releases_api.ReleaseRequestViewSet, basename="api-release-request")
router.register(r"access-requests", research_api.MyAccessRequestViewSet, basename="api-my-access-request")
router.register(rf"{STUDY}/data-use-agreement", research_api.StudyAgreementViewSet, basename="api-agreement")
router.register(rf"{STUDY}/access-requests", research_api.StudyAccessRequestViewSet, basename="api-access-request")
router.register(rf"{STUDY}/releases", research_api.ReleasedViewSet, basename="api-released")
router.register(rf"{STUDY}/released-episodes", research_api.ReleasedEpisodeViewSet, basename="api-released-episode")
router.register(rf"{STUDY}/datasets", research_api.DatasetViewSet, basename="api-dataset")
router.register(rf"{STUDY}/links", research_api.IssuedLinkViewSet, basename="api-issued-link")
router.register(rf"{STUDY}/audit-events", audit_api.AuditEventViewSet, basename="api-audit-event")
router.register(rf"{STUDY}/alerts", fixity_api.AlertViewSet, basename="api-alert")

urlpatterns = router.urls
