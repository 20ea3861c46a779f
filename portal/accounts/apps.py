from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "portal.accounts"
    label = "accounts"
    verbose_name = "Accounts and sign-in"

    def ready(self) -> None:
        from portal.accounts import receivers  # noqa: F401  (connects the audit receivers)
