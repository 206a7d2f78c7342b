from django.apps import AppConfig


class GuaranteeConfig(AppConfig):
    name = "yoco.guarantee"
    label = "guarantee"
    verbose_name = "Contracts, years and credits"
