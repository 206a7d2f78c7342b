"""Account-team admin: customers and their portal users, clusters and every credential.

Every change is a `yoco.accounts.actions` function (audited); keys are shown once, in a
message, and stored hashed. Nothing here is ever hard-deleted except a membership, through its
action (the audit record stays)."""

from django.contrib import admin, messages
from django.utils.html import format_html_join

from yoco.accounts import actions
from yoco.accounts.history import audit_history
from yoco.accounts.models import (
    AuditRecord,
    BillingToken,
    Cluster,
    ClusterKey,
    Customer,
    Membership,
    ReadToken,
)
from yoco.lib.admin import ReadOnlyAdmin, ReadOnlyInline, each_action, show_key_once
from yoco.lib.errors import ActionError


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]
    verbose_name = "portal user"
    verbose_name_plural = "portal users (a user belongs to one customer)"

    def has_change_permission(self, request, obj=None):
        return False  # add or remove; a membership is never edited in place


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ["name", "created", "contract_list"]
    search_fields = ["name"]
    inlines = [MembershipInline]
    actions = ["create_read_token"]

    def get_readonly_fields(self, request, obj=None):
        base = ["created", "clusters_and_contracts", "history"]
        return ["name", *base] if obj else base

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name"]
        return ["name", "created", "clusters_and_contracts", "history"]

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        found = super().get_actions(request)
        found.pop("delete_selected", None)
        return found

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Django runs this view inside one transaction; the do_* actions that save_model and
        # save_formset call are durable transactions of their own, so they must not be nested.
        return self._changeform_view(request, object_id, form_url, extra_context)

    @admin.display(description="contracts")
    def contract_list(self, customer):
        return ", ".join(str(c.pk) for c in customer.contracts.all()) or "—"

    @admin.display(description="clusters and contracts")
    def clusters_and_contracts(self, customer):
        clusters = ", ".join(c.name for c in customer.clusters.all()) or "none"
        contracts = format_html_join(
            ", ",
            '<a href="../../../guarantee/contract/{}/change/">contract {}</a>',
            ((c.pk, c.pk) for c in customer.contracts.all()),
        )
        return format_html_join("", "{}<br>{}", [(f"clusters: {clusters}", contracts)])

    @admin.display(description="audit history")
    def history(self, customer):
        return audit_history("Customer", customer.pk)

    def save_model(self, request, obj, form, change):
        if change:
            return  # the name is read-only; memberships are saved by save_formset
        created = actions.do_create_customer(name=obj.name, actor=request.user)
        obj.pk, obj.created = created.pk, created.created
        obj._state.adding = False

    def save_formset(self, request, form, formset, change):
        customer = form.instance
        # What the admin's own change message reads (normally set by formset.save()).
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        for inline_form in formset.forms:
            data = getattr(inline_form, "cleaned_data", None) or {}
            membership = inline_form.instance
            try:
                if data.get("DELETE") and membership.pk:
                    actions.do_remove_member(membership, actor=request.user)
                    formset.deleted_objects.append(membership)
                elif not membership.pk and data.get("user"):
                    added = actions.do_add_member(customer, data["user"], actor=request.user)
                    formset.new_objects.append(added)
            except ActionError as exc:
                self.message_user(request, str(exc), messages.ERROR)

    @each_action(description="Create a read token (shown once)")
    def create_read_token(self, request, customer):
        record, key = actions.do_create_read_token(customer, actor=request.user)
        show_key_once(self, request, f"Read token {record.prefix} for {customer}", key)


class ClusterKeyInline(ReadOnlyInline):
    model = ClusterKey
    fields = ["prefix", "name", "created", "revoked"]


@admin.register(Cluster)
class ClusterAdmin(ReadOnlyAdmin):
    list_display = ["name", "customer", "contract_list", "active_keys", "created"]
    list_filter = ["customer"]
    search_fields = ["name", "customer__name"]
    fields = ["name", "customer", "created", "history"]
    readonly_fields = fields
    inlines = [ClusterKeyInline]
    actions = ["create_key", "rotate_key"]

    @admin.display(description="contracts")
    def contract_list(self, cluster):
        return ", ".join(str(c.pk) for c in cluster.contracts.all()) or "—"

    @admin.display(description="active keys")
    def active_keys(self, cluster):
        return cluster.keys.filter(revoked=False).count()

    @admin.display(description="audit history")
    def history(self, cluster):
        return audit_history("Cluster", cluster.pk)

    @each_action(description="Create an extra ingest key (shown once)")
    def create_key(self, request, cluster):
        record, key = actions.do_create_cluster_key(cluster, actor=request.user)
        show_key_once(self, request, f"Ingest key {record.prefix} for {cluster}", key)

    @each_action(description="Rotate the ingest key: new key (shown once), old ones revoked")
    def rotate_key(self, request, cluster):
        record, key = actions.do_rotate_cluster_key(cluster, actor=request.user)
        show_key_once(self, request, f"New ingest key {record.prefix} for {cluster}", key)


class KeyAdmin(ReadOnlyAdmin):
    list_display = ["prefix", "name", "created", "expiry_date", "revoked"]
    list_filter = ["revoked", "created"]
    search_fields = ["name", "prefix"]
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        return [*self.extra_fields, "prefix", "name", "created", "revoked", "history"]

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    extra_fields: list[str] = []

    @admin.display(description="audit history")
    def history(self, key):
        return audit_history(type(key).__name__, key.prefix)

    @each_action(description="Revoke (cannot be undone)")
    def revoke(self, request, key):
        if actions.do_revoke_key(key, actor=request.user):
            return "revoked"
        return "was already revoked"


@admin.register(ClusterKey)
class ClusterKeyAdmin(KeyAdmin):
    list_display = ["prefix", "cluster", *KeyAdmin.list_display[1:]]
    extra_fields = ["cluster"]


@admin.register(ReadToken)
class ReadTokenAdmin(KeyAdmin):
    list_display = ["prefix", "customer", *KeyAdmin.list_display[1:]]
    extra_fields = ["customer"]


@admin.register(BillingToken)
class BillingTokenAdmin(KeyAdmin):
    """Billing tokens are made with `manage.py create_billing_token` (shown once there)."""


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = ["id", "at", "actor_label", "action", "object_type", "object_id", "reason"]
    list_filter = ["action", "object_type"]
    search_fields = ["object_id", "actor_label", "reason"]
    fields = [
        "at",
        "actor_label",
        "action",
        "object_type",
        "object_id",
        "reason",
        "before",
        "after",
    ]
    readonly_fields = fields
    show_full_result_count = False
