"""Account-team admin: contracts, their years and credits, incidents (with the outcome
override), the customers' disputes (a queue, oldest first) and jobs.

Read-only pages with admin actions; every action is a `do_*` function of
`yoco.guarantee.actions` (one transaction, its audit record inside it). Credits can never be
deleted."""

from decimal import Decimal

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from yoco.accounts.history import audit_history
from yoco.events.models import Event
from yoco.guarantee import actions, rules, sizing
from yoco.guarantee.evidence import evidence_hash
from yoco.guarantee.models import Contract, ContractYear, Credit, Dispute, Incident, Job
from yoco.lib.admin import ReadOnlyAdmin, ReadOnlyInline, ReasonForm, each_action, form_action
from yoco.lib.vocabulary import OVERRIDE_OUTCOMES


def _link(obj, label=None):
    if obj is None:
        return "—"
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label or str(obj))


class ContractYearInline(ReadOnlyInline):
    model = ContractYear
    fields = ["number", "start", "end", "state", "counts", "needs_review", "closed_at"]


class ContractParametersForm(ReasonForm):
    checkpoint_interval_minutes = forms.IntegerField(
        min_value=1, initial=rules.DEFAULT_CHECKPOINT_INTERVAL_MINUTES
    )
    restart_minutes = forms.IntegerField(min_value=0, initial=rules.DEFAULT_RESTART_MINUTES)
    gpu_hour_price = forms.DecimalField(
        min_value=0, max_digits=12, decimal_places=4, initial=rules.DEFAULT_GPU_HOUR_PRICE
    )
    spare_return_hours = forms.DecimalField(
        min_value=Decimal("0.01"),
        max_digits=7,
        decimal_places=2,
        initial=sizing.DEFAULT_SPARE_RETURN_HOURS,
        help_text="The spare-sizing advisor's T, in hours.",
    )
    field_order = [
        "checkpoint_interval_minutes",
        "restart_minutes",
        "gpu_hour_price",
        "spare_return_hours",
        "reason",
    ]


@admin.register(Contract)
class ContractAdmin(ReadOnlyAdmin):
    """Contracts are made with `manage.py create_contract` (it prints the keys once)."""

    list_display = ["id", "customer", "start", "years", "annual", "target", "credit_rate"]
    list_filter = ["currency"]
    search_fields = ["customer__name", "clusters__name"]
    list_select_related = ["customer"]
    fields = [
        "customer",
        "cluster_list",
        "start",
        "years",
        "annual",
        "target",
        "credit_rate",
        "deadline_minutes",
        "grace_days",
        "frameworks",
        "excluded_categories",
        "checkpoint_interval_minutes",
        "restart_minutes",
        "gpu_hour_price",
        "spare_return_hours",
        "created",
        "history",
    ]
    readonly_fields = fields
    inlines = [ContractYearInline]
    actions = ["set_parameters"]

    @form_action(
        description="Change progress-protected and advisor parameters (reason required)",
        title="Change the contract's parameters",
        explanation=(
            'The assumptions of the portal\'s "progress protected" figure (checkpoint '
            "interval, restart time, GPU-hour price) and the spare-sizing advisor's T (hours a "
            "failed worker is out before it is back as a spare). The customer sees them on the "
            "contract page. Every selected contract gets the same values."
        ),
        form_class=ContractParametersForm,
    )
    def set_parameters(self, request, contract, data):
        actions.do_set_contract_parameters(contract, actor=request.user, **data)
        return "parameters set"

    @admin.display(description="annual value")
    def annual(self, contract):
        value = rules.format_amount(Decimal(contract.annual_value), contract.currency)
        return f"{value} {contract.currency}"

    @admin.display(description="clusters")
    def cluster_list(self, contract):
        return format_html(
            "{}",
            ", ".join(c.name for c in contract.clusters.all()) or "—",
        )

    @admin.display(description="audit history")
    def history(self, contract):
        return audit_history("Contract", contract.pk)


@admin.display(description="evidence SHA-256")
def evidence_sha256(obj) -> str:
    """The hash the audit record of the closing (or earning) holds; `verify_credit` checks it."""
    return evidence_hash(obj.evidence) if obj.evidence else "—"


@admin.register(ContractYear)
class ContractYearAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "number", "start", "end", "state", "needs_review", "credit"]
    list_filter = ["state", "needs_review"]
    search_fields = ["contract__customer__name"]
    list_select_related = ["contract__customer"]
    fields = [
        "contract",
        "number",
        "start",
        "end",
        "state",
        "counts",
        "closed_at",
        "needs_review",
        "review_note",
        "credit",
        evidence_sha256,
        "history",
    ]
    readonly_fields = fields
    actions = ["close_year", "reopen_year"]

    @admin.display(description="credit")
    def credit(self, year):
        credits = list(year.credits.all())
        live = [c for c in credits if c.state != Credit.VOIDED]
        return _link((live or credits or [None])[-1])

    @admin.display(description="audit history")
    def history(self, year):
        return audit_history("ContractYear", year.pk)

    @each_action(description="Close (freeze the result, earn the credit of a miss)")
    def close_year(self, request, year):
        if actions.do_close_year_now(year, actor=request.user):
            return "closed"
        return "was not open"

    @form_action(
        description="Reopen (reason required)",
        title="Reopen the year",
        explanation=(
            "The year's result is live again until it is closed once more. Its credit, if "
            "earned or approved, is voided (closing again earns a fresh one if it still "
            "misses); a year whose credit is exported cannot be reopened."
        ),
    )
    def reopen_year(self, request, year, data):
        actions.do_reopen_year(year, reason=data["reason"], actor=request.user)
        return "reopened"


class BookOrderForm(ReasonForm):
    order_value = forms.DecimalField(
        min_value=0,
        max_digits=20,
        decimal_places=6,
        help_text="The renewal or expansion order's value, in the credit's currency.",
    )
    field_order = ["order_value", "reason"]
    reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Optional: the order's reference.",
    )


class OptionalReasonForm(forms.Form):
    reason = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 60}), help_text="Optional."
    )


@admin.register(Credit)
class CreditAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "customer",
        "contract_year",
        "state",
        "shown_amount",
        "basis",
        "changed_by",
        "change_seq",
    ]
    list_filter = ["state", "basis", "currency"]
    search_fields = ["contract_year__contract__customer__name"]
    list_select_related = ["contract_year__contract__customer", "amount_changed_by"]
    fields = [
        "contract_year",
        "state",
        "shown_amount",
        "basis",
        "order_value",
        "changed_by",
        evidence_sha256,
        "evidence",
        "change_seq",
        "created",
        "history",
    ]
    readonly_fields = fields
    actions = ["approve", "void", "book_order"]

    @admin.display(description="customer")
    def customer(self, credit):
        return credit.contract_year.contract.customer

    @admin.display(description="amount")
    def shown_amount(self, credit):
        return f"{rules.format_amount(Decimal(credit.amount), credit.currency)} {credit.currency}"

    @admin.display(description="amount set by")
    def changed_by(self, credit):
        return credit.amount_changed_by or "system (annual value estimate)"

    @admin.display(description="audit history")
    def history(self, credit):
        return audit_history("Credit", credit.pk)

    @form_action(
        description="Approve (four-eyes: not the person who set the amount)",
        form_class=OptionalReasonForm,
        title="Approve credits",
        explanation=(
            "Four-eyes: you cannot approve a credit whose amount you set. A credit earned by "
            "the system on the annual value may be approved by any account-team member."
        ),
    )
    def approve(self, request, credit, data):
        actions.do_approve_credit(credit, reason=data["reason"], actor=request.user)
        return "approved"

    @form_action(
        description="Void (reason required)",
        title="Void credits",
        explanation="An exported credit is never changed.",
    )
    def void(self, request, credit, data):
        actions.do_void_credit(credit, reason=data["reason"], actor=request.user)
        return "voided"

    @form_action(
        description="Book the renewal/expansion order value",
        form_class=BookOrderForm,
        title="Book the order value",
        explanation=(
            "The credit becomes credit rate × order value and goes back to earned; another "
            "account-team member must approve it."
        ),
    )
    def book_order(self, request, credit, data):
        credit = actions.do_book_order(
            credit, order_value=data["order_value"], reason=data["reason"], actor=request.user
        )
        amount = rules.format_amount(Decimal(credit.amount), credit.currency)
        return f"amount now {amount} {credit.currency}; someone else must approve it"


class OverrideForm(ReasonForm):
    outcome = forms.ChoiceField(choices=[(o, o) for o in OVERRIDE_OUTCOMES])
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

    @form_action(
        description="Override the outcome (reason required)",
        form_class=OverrideForm,
        title="Override the outcome",
        explanation=(
            "The override, its reason and author are kept on the incident. An open year's "
            "counts follow; a closed year is marked for review instead of changed."
        ),
    )
    def override_outcome(self, request, incident, data):
        actions.do_override_outcome(
            incident, outcome=data["outcome"], reason=data["reason"], actor=request.user
        )
        return f"outcome overridden to {data['outcome']}"

    @form_action(
        description="Clear the override (back to the computed outcome)",
        title="Clear the override",
        explanation="The incident goes back to its computed outcome.",
    )
    def clear_override(self, request, incident, data):
        actions.do_clear_override(incident, reason=data["reason"], actor=request.user)
        return "override cleared"


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ["source", "cluster", "frameworks", "gpus", "started_at", "status"]
    list_filter = ["cluster", "status"]
    search_fields = ["source"]


class DisputeStateFilter(admin.SimpleListFilter):
    """Open disputes by default: the page is the account team's queue."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [*Dispute.STATES, ("all", "all")]

    def choices(self, changelist):
        for lookup, title in self.lookup_choices:
            yield {
                "selected": (self.value() or Dispute.OPEN) == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request, queryset):
        value = self.value() or Dispute.OPEN
        return queryset if value == "all" else queryset.filter(state=value)


@admin.register(Dispute)
class DisputeAdmin(ReadOnlyAdmin):
    list_display = ["id", "opened_at", "customer", "incident_link", "outcome", "reason", "state"]
    list_filter = [DisputeStateFilter]
    list_select_related = ["incident__cluster__customer"]
    ordering = ["opened_at", "pk"]  # oldest first
    actions = ["uphold", "reject"]
    fields = ["incident_link", "reason", "opened_by_label", "opened_at", "state", "answer",
              "answered_by", "answered_at", "history"]  # fmt: skip
    readonly_fields = fields

    @admin.display(description="customer")
    def customer(self, dispute):
        return dispute.incident.cluster.customer

    @admin.display(description="incident")
    def incident_link(self, dispute):
        return _link(dispute.incident)

    @admin.display(description="outcome now")
    def outcome(self, dispute):
        return dispute.incident.outcome

    @admin.display(description="audit history")
    def history(self, dispute):
        return audit_history("Dispute", dispute.pk)

    @form_action(
        description="Uphold (override the outcome; reason required)",
        form_class=OverrideForm,
        title="Uphold the dispute",
        explanation=(
            "The incident's outcome is overridden with this reason, which the customer sees. "
            "An open year's counts follow; a closed year is marked for review."
        ),
    )
    def uphold(self, request, dispute, data):
        actions.do_uphold_dispute(
            dispute, outcome=data["outcome"], reason=data["reason"], actor=request.user
        )
        return f"upheld; outcome now {data['outcome']}"

    @form_action(
        description="Reject (reason required)",
        title="Reject the dispute",
        explanation="The outcome stands; the customer sees this reason.",
    )
    def reject(self, request, dispute, data):
        actions.do_reject_dispute(dispute, reason=data["reason"], actor=request.user)
        return "rejected"
