from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.access import views as access_views
from portal.accounts import views as accounts_views
from portal.core import views as core_views
from portal.releases import views as releases_views
from portal.research.views import access as research_access
from portal.research.views import client as research_client
from portal.research.views import links as research_links

urlpatterns = [
    path("", access_views.dashboard, name="dashboard"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", include("portal.accounts.urls")),
    path("notifications/", include("portal.notifications.urls")),
    path("healthz", core_views.healthz, name="healthz"),
    path("favicon.ico", core_views.favicon),
    path("studies/<slug:study_code>/", include("portal.studies.urls")),
    path("studies/<slug:study_code>/recordings/", include("portal.recordings.urls")),
    path("studies/<slug:study_code>/releases/", include("portal.releases.urls")),
    path("studies/<slug:study_code>/audit/", include("portal.studies.audit_urls")),
    path("studies/<slug:study_code>/", include("portal.research.urls")),
    path("studies/<slug:study_code>/", include("portal.fixity.urls")),
    path("research/", research_access.research_home, name="research-home"),
    path("research/links/", research_links.my_links, name="research-links"),
    path("downloads/<str:token>", research_links.download, name="research-download"),
    path(".well-known/ceres-release-key", releases_views.public_key, name="release-public-key"),
    path("client/", research_client.client_page, name="client"),
    path("client/<str:filename>", research_client.client_wheel, name="client-wheel"),
    path("studies/<slug:study_code>/lockouts/", accounts_views.study_lockouts, name="study-lockouts"),
    path("api/", include("portal.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]

# 404 and 500 use Django's handlers with templates/404.html and 500.html.
handler400 = core_views.bad_request
handler403 = access_views.permission_denied
