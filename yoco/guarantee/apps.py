from django.apps import AppConfig


class GuaranteeConfig(AppConfig):
    name = "yoco.guarantee"
    label = "guarantee"
    verbose_name = "Contracts, years, credits, jobs and incidents"

    def ready(self):
        # Registers the tasks that lower layers send by name (ingest → process_events_task).
        from yoco.guarantee import tasks  # noqa: F401
