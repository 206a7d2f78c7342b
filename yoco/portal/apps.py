from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "yoco.portal"
    verbose_name = "Customer portal"
