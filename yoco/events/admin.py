"""Account-team admin: the raw events as stored, read-only (a quarantined one with its reason)."""

from django.contrib import admin

from yoco.events.models import Event
from yoco.lib.admin import ReadOnlyAdmin


class ProcessingFilter(admin.SimpleListFilter):
    title = "processing"
    parameter_name = "processing"

    def lookups(self, request, model_admin):
        return [("pending", "pending"), ("processed", "processed"), ("quarantined", "quarantined")]

    def queryset(self, request, queryset):
        if self.value() == "pending":
            return queryset.pending()
        if self.value() == "processed":
            return queryset.filter(processed_at__isnull=False)
        if self.value() == "quarantined":
            return queryset.filter(quarantined_at__isnull=False)
        return queryset


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    """Stored events; a quarantined one (it could not be processed) shows its reason."""

    list_display = [
        "event_id", "type", "source", "subject", "time", "received_at", "processed_at",
        "quarantined_at",
    ]  # fmt: skip
    list_filter = [ProcessingFilter, "type", "cluster"]
    search_fields = ["event_id", "source", "subject"]
    show_full_result_count = False
