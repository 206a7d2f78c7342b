"""Account-team admin: incidents (with the outcome override), jobs and raw events, read-only.

The override goes through `do_override_outcome` / `do_clear_override` (audited, reason
required); nothing else here changes anything."""

from django import forms
from django.contrib import admin
from django.utils.html import format_html_join

from yoco.events.models import Event, Incident, Job
from yoco.guarantee import actions
from yoco.lib.admin import ReadOnlyAdmin, ReasonForm, ask_then_apply, audit_history


class OverrideForm(ReasonForm):
    outcome = forms.ChoiceField(choices=[(o, o) for o in actions.OVERRIDE_OUTCOMES])
    field_order = ["outcome", "reason"]


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "cluster",
        "subject",
        "contract",
        "year_number",
        "detected_at",
        "trigger",
        "category",
        "computed_outcome",
        "outcome",
        "override_outcome",
    ]
    list_filter = ["outcome", "override_outcome", "trigger", "category", "cluster"]
    search_fields = ["subject", "cluster__name", "source"]
    list_select_related = ["cluster", "contract__customer"]
    date_hierarchy = "detected_at"
    show_full_result_count = False
    actions = ["override_outcome", "clear_override"]
    fields = [
        "cluster",
        "subject",
        "source",
        "contract",
        "year_number",
        "detected_at",
        "deadline_at",
        "trigger",
        "category",
        "scope",
        "computed_outcome",
        "outcome",
        "override_outcome",
        "override_reason",
        "override_by",
        "override_at",
        "downtime_ms",
        "gpus",
        "timeline",
        "history",
    ]
    readonly_fields = fields

    @admin.display(description="events")
    def timeline(self, incident):
        events = Event.objects.filter(cluster=incident.cluster, subject=incident.subject).order_by(
            "time", "event_id"
        )
        return format_html_join(
            "",
            "<div><code>{}</code> {} <code>{}</code></div>",
            ((f"{e.time:%Y-%m-%d %H:%M:%S.%f}", e.type, e.data) for e in events),
        )

    @admin.display(description="audit history")
    def history(self, incident):
        return audit_history("Incident", incident.pk)

    @admin.action(description="Override the outcome (reason required)")
    def override_outcome(self, request, queryset):
        def apply(incident, data):
            actions.do_override_outcome(
                incident, outcome=data["outcome"], reason=data["reason"], actor=request.user
            )
            return f"outcome overridden to {data['outcome']}"

        return ask_then_apply(
            self,
            request,
            queryset,
            form_class=OverrideForm,
            title="Override the outcome",
            description=(
                "The override, its reason and author are kept on the incident. An open year's "
                "counts follow; a closed year is marked for review instead of changed."
            ),
            apply=apply,
        )

    @admin.action(description="Clear the override (back to the computed outcome)")
    def clear_override(self, request, queryset):
        def apply(incident, data):
            actions.do_clear_override(incident, reason=data["reason"], actor=request.user)
            return "override cleared"

        return ask_then_apply(
            self,
            request,
            queryset,
            form_class=ReasonForm,
            title="Clear the override",
            description="The incident goes back to its computed outcome.",
            apply=apply,
        )


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["source", "cluster", "frameworks", "gpus", "started_at", "status"]
    list_filter = ["cluster", "status"]
    search_fields = ["source"]


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
