from django.urls import path

from portal.accounts import views

urlpatterns = [
    path("", views.account, name="account"),
    path("tokens/<uint:pk>/revoke/", views.revoke_token, name="token-revoke"),
    path("second-factor/", views.second_factor, name="second-factor"),
    path("second-factor/remove/", views.remove_second_factor, name="second-factor-remove"),
]
