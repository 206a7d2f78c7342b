from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "yoco.events"
    label = "events"
    verbose_name = "Raw events"
