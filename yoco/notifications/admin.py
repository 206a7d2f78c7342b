"""Account-team admin: contacts and webhook endpoints (added through the `do_*` actions; an
endpoint's secret is shown once), the outbox and every delivery attempt (read-only)."""

from django.contrib import admin, messages

from yoco.lib.admin import ReadOnlyAdmin, ReadOnlyInline, each_action, show_key_once
from yoco.lib.errors import ActionError
from yoco.notifications import actions
from yoco.notifications.models import Contact, DeliveryAttempt, Endpoint, Notification


class AddThroughActionAdmin(ReadOnlyAdmin):
    """The add form is open; saving it calls `add(request, cleaned_data)` (a `do_*` action)."""

    def has_add_permission(self, request, obj=None):
        return True

    def get_readonly_fields(self, request, obj=None):
        return self.fields if obj is not None else []

    def save_model(self, request, obj, form, change):
        try:
            saved = self.add(request, form.cleaned_data)
        except ActionError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        obj.pk = saved.pk

    def add(self, request, data):
        raise NotImplementedError


@admin.register(Contact)
class ContactAdmin(AddThroughActionAdmin):
    list_display = ["email", "kind", "customer", "created"]
    list_filter = ["kind"]
    search_fields = ["email", "customer__name"]
    fields = ["customer", "email", "kind"]
    actions = ["remove"]

    def add(self, request, data):
        return actions.do_add_contact(
            data["customer"], email=data["email"], kind=data["kind"], actor=request.user
        )

    @each_action(description="Remove the selected contacts")
    def remove(self, request, contact):
        actions.do_remove_contact(contact, actor=request.user)
        return "removed"


class AttemptInline(ReadOnlyInline):
    model = DeliveryAttempt
    fields = ["number", "at", "ok", "status_code", "latency_ms", "error"]
    show_change_link = False


@admin.register(Endpoint)
class EndpointAdmin(AddThroughActionAdmin):
    list_display = ["url", "owner", "customer", "active", "created"]
    list_filter = ["owner", "active"]
    search_fields = ["url", "customer__name"]
    fields = ["owner", "customer", "url", "active"]
    actions = ["disable", "send_test"]

    def add(self, request, data):
        customer = data["customer"] if data["owner"] == Endpoint.CUSTOMER else None
        if data["owner"] == Endpoint.CUSTOMER and customer is None:
            raise ActionError("a customer endpoint needs its customer")
        endpoint, secret = actions.do_add_endpoint(
            url=data["url"], customer=customer, actor=request.user
        )
        show_key_once(self, request, f"Signing secret of {endpoint.url}", secret)
        return endpoint

    @each_action(description="Disable (no further notifications)")
    def disable(self, request, endpoint):
        return "disabled" if actions.do_disable_endpoint(endpoint, actor=request.user) else None

    @each_action(description="Send a test event")
    def send_test(self, request, endpoint):
        notification = actions.do_send_test(endpoint, actor=request.user)
        return f"test {notification.webhook_id} queued"


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ["created", "event_type", "customer", "channel", "email", "endpoint",
                    "state", "attempts", "next_attempt_at", "webhook_id"]  # fmt: skip
    list_filter = ["state", "channel", "event_type"]
    search_fields = ["webhook_id", "email", "endpoint__url", "customer__name"]
    list_select_related = ["customer", "endpoint"]
    fields = ["event_type", "customer", "channel", "email", "endpoint", "webhook_id", "state",
              "attempts", "next_attempt_at", "delivered_at", "event"]  # fmt: skip
    readonly_fields = fields
    inlines = [AttemptInline]


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(ReadOnlyAdmin):
    list_display = ["at", "notification", "number", "ok", "status_code", "latency_ms", "error"]
    list_filter = ["ok"]
    list_select_related = ["notification__endpoint"]
