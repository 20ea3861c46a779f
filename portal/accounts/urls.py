from django.urls import path

from portal.accounts import views, views_password

urlpatterns = [
    path("", views.account, name="account"),
    path("tokens/<uint:pk>/revoke/", views.revoke_token, name="token-revoke"),
    path("second-factor/", views.second_factor, name="second-factor"),
    path("second-factor/remove/", views.remove_second_factor, name="second-factor-remove"),
    path("second-factor/recovery-codes/", views.recovery_codes, name="recovery-codes"),
    path("email/", views_password.email_change, name="email-change"),
    path("email/remove/", views_password.email_remove, name="email-remove"),
    path("email/confirm/<str:token>/", views_password.email_confirm, name="email-confirm"),
    path("password/", views_password.PasswordChange.as_view(), name="password-change"),
    path("password/reset/", views_password.PasswordReset.as_view(), name="password-reset"),
    path("password/reset/sent/", views_password.PasswordResetDone.as_view(), name="password-reset-done"),
    path("password/reset/done/", views_password.PasswordResetComplete.as_view(), name="password-reset-complete"),
    path("password/reset/<str:uidb64>/<str:token>/", views_password.PasswordResetConfirm.as_view(),
         name="password-reset-confirm"),
]
