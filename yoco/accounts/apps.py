from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "yoco.accounts"
    label = "accounts"
    verbose_name = "Customers, clusters, keys and the audit trail"
