from django.urls import path

from portal.releases import face_review, views

urlpatterns = [
    path("", views.release_list, name="release-list"),
    path("new/", views.release_new, name="release-new"),
    path("<uint:number>/", views.release_detail, name="release-detail"),
    path("<uint:number>/status/", views.release_status, name="release-status"),
    path("<uint:number>/submit/", views.release_submit, name="release-submit"),
    path("<uint:number>/approve/", views.release_approve, name="release-approve"),
    path("<uint:number>/reject/", views.release_reject, name="release-reject"),
    path("<uint:number>/reverify/", views.release_reverify, name="release-reverify"),
    path("<uint:number>/retry/", views.release_retry, name="release-retry"),
    path("<uint:number>/manifest/", views.release_manifest, name="release-manifest"),
    path("<uint:number>/signature/", views.release_signature, name="release-signature"),
    path("<uint:number>/episodes/<uint:episode_index>/", views.release_episode, name="release-episode"),
    path("<uint:number>/episodes/<uint:episode_index>/review.json", views.release_episode_data,
         name="release-episode-data"),
    path("<uint:number>/episodes/<uint:episode_index>/video.mp4", views.release_episode_video,
         name="release-episode-video"),
    path("<uint:number>/episodes/<uint:episode_index>/faces.json", face_review.faces_data,
         name="release-episode-faces"),
    path("<uint:number>/episodes/<uint:episode_index>/faces/add-box/", face_review.add_box,
         name="release-episode-faces-add-box"),
    path("<uint:number>/episodes/<uint:episode_index>/faces/remove-box/", face_review.remove_box,
         name="release-episode-faces-remove-box"),
    path("<uint:number>/episodes/<uint:episode_index>/faces/remove-detection/", face_review.remove_detection,
         name="release-episode-faces-remove-detection"),
    path("<uint:number>/episodes/<uint:episode_index>/faces/reviewed/", face_review.mark_reviewed,
         name="release-episode-faces-reviewed"),
    path("<uint:number>/episodes/<uint:episode_index>/faces/detect/", face_review.detect_again,
         name="release-episode-faces-detect"),
]
