from django.urls import path

from portal.releases import views

urlpatterns = [
    path("", views.release_list, name="release-list"),
    path("new/", views.release_new, name="release-new"),
    path("<int:number>/", views.release_detail, name="release-detail"),
    path("<int:number>/status/", views.release_status, name="release-status"),
    path("<int:number>/submit/", views.release_submit, name="release-submit"),
    path("<int:number>/approve/", views.release_approve, name="release-approve"),
    path("<int:number>/reject/", views.release_reject, name="release-reject"),
    path("<int:number>/reverify/", views.release_reverify, name="release-reverify"),
    path("<int:number>/retry/", views.release_retry, name="release-retry"),
    path("<int:number>/manifest/", views.release_manifest, name="release-manifest"),
    path("<int:number>/signature/", views.release_signature, name="release-signature"),
    path("<int:number>/episodes/<int:episode_index>/", views.release_episode, name="release-episode"),
    path("<int:number>/episodes/<int:episode_index>/review.json", views.release_episode_data,
         name="release-episode-data"),
    path("<int:number>/episodes/<int:episode_index>/video.mp4", views.release_episode_video,
         name="release-episode-video"),
]
