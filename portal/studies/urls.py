from django.urls import path

from portal.studies import views

urlpatterns = [
    path("", views.overview, name="study-overview"),
    path("settings/", views.study_settings, name="study-settings"),
    path("settings/status/", views.set_status, name="study-set-status"),
    path("settings/audio-policy/", views.set_audio_policy, name="study-set-audio-policy"),
    path("settings/approvals/", views.set_approvals, name="study-set-approvals"),
    path("settings/face-policy/", views.set_face_policy, name="study-set-face-policy"),
    path("settings/approvals/confirm/", views.confirm_approvals, name="study-confirm-approvals"),
    path("settings/approval-second-factor/", views.set_approval_second_factor,
         name="study-set-approval-second-factor"),
    path("settings/carry-over-approvals/", views.set_carry_over_approvals, name="study-set-carry-over-approvals"),
    path("settings/data-use-agreement/", views.publish_agreement, name="study-publish-agreement"),
    path("headsets/", views.headsets, name="study-headsets"),
    path("headsets/suggest/", views.suggest_headsets, name="study-suggest-headsets"),
    path("headsets/import/", views.import_headsets, name="study-import-headsets"),
    path("headsets/<uint:headset_pk>/assigned-on/", views.assign_headset, name="study-assign-headset"),
    path("headsets/<uint:headset_pk>/retire/", views.retire_headset, name="study-retire-headset"),
    path("demonstrators/", views.demonstrators, name="study-demonstrators"),
    path("demonstrators/suggest/", views.suggest_demonstrators, name="study-suggest-demonstrators"),
    path("demonstrators/new/", views.create_demonstrator, name="study-create-demonstrator"),
    path("demonstrators/<uint:demonstrator_pk>/", views.demonstrator_detail, name="study-demonstrator"),
    path("demonstrators/<uint:demonstrator_pk>/consent/", views.give_consent, name="study-give-consent"),
    path("consent-documents/", views.consent_documents, name="study-consent-documents"),
    path("consent-documents/upload/", views.upload_consent_document, name="study-upload-consent-document"),
    path("consent-documents/<uint:document_pk>/file/", views.consent_document_file, name="study-consent-document-file"),
    path("consent-documents/<uint:document_pk>/accept/", views.accept_consent_document,
         name="study-accept-consent-document"),
]
