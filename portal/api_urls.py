"""The REST API: one router for every app's view sets."""

from rest_framework.routers import DefaultRouter

from portal.accounts import api as accounts_api
from portal.faces import api as faces_api
from portal.fixity import api as fixity_api
from portal.recordings import api as recordings_api
from portal.releases import api as releases_api
from portal.research.api import access as research_access
from portal.research.api import catalogue as research_catalogue
from portal.research.api import datasets as research_datasets
from portal.research.api import links as research_links
from portal.research.api import withdrawals as research_withdrawals
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
# Research's: a withdrawal posted here starts the withdrawal job (research builds on the registry).
router.register(rf"{STUDY}/consent-events", research_withdrawals.ConsentEventViewSet, basename="api-consent-event")
router.register(rf"{STUDY}/recordings", recordings_api.RecordingViewSet, basename="api-recording")
router.register(rf"{STUDY}/episodes", recordings_api.EpisodeViewSet, basename="api-episode")
router.register(rf"{STUDY}/faces", faces_api.EpisodeFacesViewSet, basename="api-episode-faces")
router.register(rf"{STUDY}/release-requests", releases_api.ReleaseRequestViewSet, basename="api-release-request")
router.register(r"access-requests", research_access.MyAccessRequestViewSet, basename="api-my-access-request")
router.register(rf"{STUDY}/data-use-agreement", research_access.StudyAgreementViewSet, basename="api-agreement")
router.register(rf"{STUDY}/access-requests", research_access.StudyAccessRequestViewSet, basename="api-access-request")
router.register(rf"{STUDY}/releases", research_catalogue.ReleasedViewSet, basename="api-released")
router.register(rf"{STUDY}/released-episodes", research_catalogue.ReleasedEpisodeViewSet,
                basename="api-released-episode")
router.register(rf"{STUDY}/datasets", research_datasets.DatasetViewSet, basename="api-dataset")
router.register(rf"{STUDY}/links", research_links.IssuedLinkViewSet, basename="api-issued-link")
router.register(rf"{STUDY}/audit-events", audit_api.AuditEventViewSet, basename="api-audit-event")
router.register(rf"{STUDY}/alerts", fixity_api.AlertViewSet, basename="api-alert")

urlpatterns = router.urls
