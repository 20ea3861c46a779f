from django.urls import path

from portal.research.views import access, archives, catalogue, datasets, links, withdrawals

# Under studies/<study_code>/.
urlpatterns = [
    path("access/", access.access_requests, name="research-access-requests"),
    path("access/request/", access.ask_access, name="research-ask"),
    path("access/agreement/", access.accept_agreement, name="research-agreement"),
    path("access/links/", links.study_links, name="research-study-links"),
    path("access/<uuid:uid>/grant/", access.grant_access, name="research-access-grant"),
    path("access/<uuid:uid>/refuse/", access.refuse_access, name="research-access-refuse"),
    path("access/<uuid:uid>/revoke/", access.revoke_access, name="research-access-revoke"),
    path("access/<uuid:uid>/cancel/", access.cancel_access, name="research-access-cancel"),
    path("released/", catalogue.browse, name="research-browse"),
    path("released/<uint:number>/", catalogue.release_page, name="research-release"),
    path("released/<uint:number>/file/", links.release_file, name="research-release-file"),
    path("released/<uint:number>/links.json", links.release_links, name="research-release-links"),
    path("released/<uint:number>/release.zip", archives.release_zip, name="research-release-zip"),
    path("released/<uint:number>/episodes/<uint:episode_index>/", catalogue.episode, name="research-episode"),
    path("released/<uint:number>/episodes/<uint:episode_index>/review.json", catalogue.episode_data,
         name="research-episode-data"),
    path("released/<uint:number>/episodes/<uint:episode_index>/video.mp4", catalogue.episode_video,
         name="research-episode-video"),
    path("datasets/", datasets.dataset_list, name="research-datasets"),
    path("datasets/<uint:number>/", datasets.dataset_page, name="research-dataset"),
    path("datasets/<uint:number>/status/", datasets.dataset_status, name="research-dataset-status"),
    path("datasets/<uint:number>/file/", links.dataset_file, name="research-dataset-file"),
    path("datasets/<uint:number>/links.json", links.dataset_links, name="research-dataset-links"),
    path("datasets/<uint:number>/dataset.zip", archives.dataset_zip, name="research-dataset-zip"),
    # The registry's demonstrator page posts here: a withdrawal of consent starts in research, which reaches
    # released data (the URL and its name are the registry's).
    path("demonstrators/<uint:demonstrator_pk>/withdraw/", withdrawals.withdraw_consent,
         name="study-withdraw-consent"),
    path("withdrawals/", withdrawals.withdrawal_list, name="research-withdrawals"),
    path("withdrawals/<uint:pk>/", withdrawals.withdrawal_detail, name="research-withdrawal"),
    path("withdrawals/<uint:pk>/status/", withdrawals.withdrawal_status, name="research-withdrawal-status"),
    path("withdrawals/<uint:pk>/run-again/", withdrawals.withdrawal_run_again, name="research-withdrawal-run-again"),
]
