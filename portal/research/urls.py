from django.urls import path

from portal.research import views

# Under studies/<study_code>/.
urlpatterns = [
    path("access/", views.access_requests, name="research-access-requests"),
    path("access/request/", views.ask_access, name="research-ask"),
    path("access/agreement/", views.accept_agreement, name="research-agreement"),
    path("access/links/", views.study_links, name="research-study-links"),
    path("access/<uuid:uid>/grant/", views.grant_access, name="research-access-grant"),
    path("access/<uuid:uid>/refuse/", views.refuse_access, name="research-access-refuse"),
    path("access/<uuid:uid>/revoke/", views.revoke_access, name="research-access-revoke"),
    path("access/<uuid:uid>/cancel/", views.cancel_access, name="research-access-cancel"),
    path("released/", views.browse, name="research-browse"),
    path("released/<uint:number>/", views.release_page, name="research-release"),
    path("released/<uint:number>/file/", views.release_file, name="research-release-file"),
    path("released/<uint:number>/links.json", views.release_links, name="research-release-links"),
    path("released/<uint:number>/episodes/<uint:episode_index>/", views.episode, name="research-episode"),
    path("released/<uint:number>/episodes/<uint:episode_index>/review.json", views.episode_data,
         name="research-episode-data"),
    path("released/<uint:number>/episodes/<uint:episode_index>/video.mp4", views.episode_video,
         name="research-episode-video"),
    path("datasets/", views.dataset_list, name="research-datasets"),
    path("datasets/<uint:number>/", views.dataset_page, name="research-dataset"),
    path("datasets/<uint:number>/status/", views.dataset_status, name="research-dataset-status"),
    path("datasets/<uint:number>/file/", views.dataset_file, name="research-dataset-file"),
    path("datasets/<uint:number>/links.json", views.dataset_links, name="research-dataset-links"),
    path("withdrawals/", views.withdrawal_list, name="research-withdrawals"),
    path("withdrawals/<uint:pk>/", views.withdrawal_detail, name="research-withdrawal"),
    path("withdrawals/<uint:pk>/status/", views.withdrawal_status, name="research-withdrawal-status"),
    path("withdrawals/<uint:pk>/run-again/", views.withdrawal_run_again, name="research-withdrawal-run-again"),
]
