from django.urls import path

from portal.recordings import views

urlpatterns = [
    path("", views.recording_list, name="recording-list"),
    path("upload/", views.upload, name="recording-upload"),
    path("episodes/", views.episode_list, name="episode-list"),
    path("<uuid:uid>/", views.recording_detail, name="recording-detail"),
    path("<uuid:uid>/status/", views.recording_status, name="recording-status"),
    path("<uuid:uid>/recheck/", views.recheck, name="recording-recheck"),
    path("<uuid:uid>/retry/", views.retry, name="recording-retry"),
    path("<uuid:uid>/register-demonstrator/", views.register_demonstrator, name="recording-register-demonstrator"),
]
