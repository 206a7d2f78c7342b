"""Who is told (contacts, webhook endpoints), what is to be told (the outbox) and how each
delivery went (attempts).

A Notification row is one change for one destination (an e-mail address or an endpoint),
written in the transaction of the change; its `webhook_id` is the Standard Webhooks message id,
the same for every retry, so a receiver de-duplicates on it.
"""

import secrets
import uuid

from django.db import models

from yoco.accounts.models import Customer


def new_secret() -> str:
    """A Standard Webhooks signing secret: `whsec_` + base64 of 24 random bytes."""
    import base64

    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def new_webhook_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


class Contact(models.Model):
    """An e-mail address told of a customer's changes: one of the customer's own, or one of
    the account team's for that customer."""

    CUSTOMER, ACCOUNT_TEAM = "customer", "account_team"

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="contacts")
    email = models.EmailField()
    kind = models.CharField(
        max_length=12, choices=[(CUSTOMER, "customer"), (ACCOUNT_TEAM, "account team")]
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["customer", "email"], name="one_contact_per_address")
        ]

    def __str__(self) -> str:
        return f"{self.email} ({self.kind} of {self.customer})"


class Endpoint(models.Model):
    """A webhook URL a customer (its changes) or billing (every credit change) registered.

    The secret is shown once, when made; it is stored as is because signing needs it."""

    CUSTOMER, BILLING = "customer", "billing"

    owner = models.CharField(max_length=8, choices=[(CUSTOMER, "customer"), (BILLING, "billing")])
    customer = models.ForeignKey(
        Customer, null=True, blank=True, on_delete=models.CASCADE, related_name="endpoints"
    )
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=80, default=new_secret, editable=False)
    active = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(owner="billing", customer__isnull=True)
                | models.Q(owner="customer", customer__isnull=False),
                name="endpoint_owner_matches_customer",
            )
        ]

    def __str__(self) -> str:
        return self.url


class Notification(models.Model):
    """One change for one destination; delivered at least once, claimed by one worker at a
    time (a conditional UPDATE on `state`), de-duplicated by the receiver on `webhook_id`."""

    PENDING, SENDING, DELIVERED, FAILED = "pending", "sending", "delivered", "failed"
    STATES = [(s, s) for s in (PENDING, SENDING, DELIVERED, FAILED)]
    EMAIL, WEBHOOK = "email", "webhook"

    event = models.JSONField(help_text="the CloudEvent; one id per change")
    event_type = models.CharField(max_length=60)
    customer = models.ForeignKey(
        Customer, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    channel = models.CharField(max_length=7, choices=[(EMAIL, EMAIL), (WEBHOOK, WEBHOOK)])
    email = models.EmailField(blank=True)
    endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    webhook_id = models.CharField(max_length=40, unique=True, default=new_webhook_id)
    state = models.CharField(max_length=9, choices=STATES, default=PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]
        indexes = [models.Index(fields=["state", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event_type} → {self.email or self.endpoint}"


class DeliveryAttempt(models.Model):
    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="delivery_attempts"
    )
    number = models.PositiveSmallIntegerField()
    at = models.DateTimeField(auto_now_add=True)
    ok = models.BooleanField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField()
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.notification}"
