"""Contracts, their years, the credits a missed year earns, and the audit trail.

State changes go through `yoco.guarantee.actions` (one `do_*` function each, one transaction,
its audit record written inside it); nothing else writes these models.
"""

from datetime import timedelta

from django.conf import settings
from django.db import models

from yoco.accounts.models import Cluster, Customer
from yoco.guarantee import rules


class Contract(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="contracts")
    clusters = models.ManyToManyField(Cluster, related_name="contracts")
    start = models.DateField()
    years = models.PositiveSmallIntegerField()
    annual_value = models.DecimalField(max_digits=20, decimal_places=6)
    currency = models.CharField(max_length=3)
    # Defaults: SPEC 4.1, written once in `rules`.
    target = models.DecimalField(max_digits=7, decimal_places=4, default=rules.DEFAULT_TARGET)
    credit_rate = models.DecimalField(
        max_digits=7, decimal_places=4, default=rules.DEFAULT_CREDIT_RATE
    )
    deadline_minutes = models.PositiveIntegerField(default=rules.DEFAULT_DEADLINE_MINUTES)
    grace_days = models.PositiveIntegerField(default=rules.DEFAULT_GRACE_DAYS)
    frameworks = models.JSONField(default=list)
    excluded_categories = models.JSONField(default=list)
    # "Progress protected" counterfactual (SPEC 4.6): the account team can change these.
    checkpoint_interval_minutes = models.PositiveIntegerField(
        default=rules.DEFAULT_CHECKPOINT_INTERVAL_MINUTES
    )
    restart_minutes = models.PositiveIntegerField(default=rules.DEFAULT_RESTART_MINUTES)
    gpu_hour_price = models.DecimalField(
        max_digits=12, decimal_places=4, default=rules.DEFAULT_GPU_HOUR_PRICE
    )
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Contract {self.pk} ({self.customer}, from {self.start})"

    @property
    def deadline(self) -> timedelta:
        return timedelta(minutes=self.deadline_minutes)

    @property
    def grace(self) -> timedelta:
        return timedelta(days=self.grace_days)


class ContractYear(models.Model):
    OPEN, CLOSED = "open", "closed"

    contract = models.ForeignKey(Contract, on_delete=models.CASCADE, related_name="contract_years")
    number = models.PositiveSmallIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    state = models.CharField(max_length=6, choices=[(OPEN, OPEN), (CLOSED, CLOSED)], default=OPEN)
    # The stored result: refreshed while open, frozen when closed.
    counts = models.JSONField(default=dict)
    closed_at = models.DateTimeField(null=True, blank=True)
    # Set when a late event would change a closed year's result; the account team decides.
    needs_review = models.BooleanField(default=False)
    review_note = models.TextField(blank=True)

    class Meta:
        ordering = ["contract", "number"]
        constraints = [
            models.UniqueConstraint(fields=["contract", "number"], name="one_row_per_contract_year")
        ]

    def __str__(self) -> str:
        return f"{self.contract} year {self.number}"


class Credit(models.Model):
    EARNED, APPROVED, EXPORTED, VOIDED = "earned", "approved", "exported", "voided"
    STATES = [(s, s) for s in (EARNED, APPROVED, EXPORTED, VOIDED)]
    BASIS_ANNUAL_VALUE, BASIS_ORDER = "annual_value_estimate", "renewal_order"

    contract_year = models.ForeignKey(
        ContractYear, on_delete=models.PROTECT, related_name="credits"
    )
    state = models.CharField(max_length=8, choices=STATES, default=EARNED)
    amount = models.DecimalField(max_digits=20, decimal_places=6)
    currency = models.CharField(max_length=3)
    basis = models.CharField(max_length=24, default=BASIS_ANNUAL_VALUE)
    order_value = models.DecimalField(max_digits=20, decimal_places=6, null=True, blank=True)
    evidence = models.JSONField(default=dict)
    amount_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Position in the append-only change sequence (the id of this credit's latest audit record):
    # the billing export pages on it.
    change_seq = models.BigIntegerField(default=0, db_index=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["contract_year"],
                condition=~models.Q(state="voided"),
                name="one_live_credit_per_year",
            )
        ]

    def __str__(self) -> str:
        return f"Credit {self.pk} ({self.state}, {self.amount} {self.currency})"


class AuditRecord(models.Model):
    """Append-only: who did what, when, why, with the state before and after."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_label = models.CharField(max_length=150, help_text="user name, or the system process")
    action = models.CharField(max_length=60)
    object_type = models.CharField(max_length=60)
    object_id = models.CharField(max_length=64)
    reason = models.TextField(blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_label} {self.action} {self.object_type}"
