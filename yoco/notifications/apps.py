from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "yoco.notifications"
    label = "notifications"
    verbose_name = "Notifications: contacts, webhook endpoints, outbox and deliveries"

    def ready(self):
        # The outbox subscribes to the guarantee's change signals (`yoco.guarantee.changes`),
        # and the delivery task registers its name in every process.
        from yoco.notifications import outbox, tasks  # noqa: F401

        outbox.connect()
