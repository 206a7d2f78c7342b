"""Contracts, their years, the credits a missed year earns, and the jobs and incidents folded
from the stored events.

State changes go through `yoco.guarantee.actions` (one `do_*` function each, one transaction,
its audit record written inside it); jobs and incidents are written by the fold alone.
"""

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Case, F, Q, Value, When

from yoco.accounts.models import Cluster, Customer
from yoco.guarantee import rules, sizing
from yoco.lib.vocabulary import FAILED, OUTCOMES, PENDING


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
    # The spare-sizing advisor's T (SPEC 4.9): hours a failed worker is out of service.
    spare_return_hours = models.DecimalField(
        max_digits=7, decimal_places=2, default=sizing.DEFAULT_SPARE_RETURN_HOURS
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
    # What the closed result was derived from (`guarantee.evidence`); empty while open.
    evidence = models.JSONField(default=dict, blank=True)

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


class Job(models.Model):
    """A training job, known by its source; folded from job.started / job.finished."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="jobs")
    source = models.CharField(max_length=300, unique=True)
    frameworks = models.JSONField(default=list, help_text="every framework its job.started named")
    # Sized for what validation admits: integers up to 2^53 - 1, a model name of any length.
    world_size = models.PositiveBigIntegerField(null=True)
    gpus = models.PositiveBigIntegerField(null=True)
    model = models.TextField(blank=True)
    mode = models.CharField(max_length=20, blank=True)
    started_at = models.DateTimeField(null=True)
    status = models.CharField(max_length=20, blank=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        db_table = "events_job"  # made in the events app; moved here with its table

    def __str__(self) -> str:
        return self.source


class IncidentQuerySet(models.QuerySet):
    """Reads see outcomes as they stand now (`rules.outcome_as_of`), whether or not the
    periodic expiry has stored them yet: a pending incident past its deadline reads as failed."""

    def as_of(self, now):
        """Each incident annotated with `outcome_now` and `computed_outcome_now`: its stored
        outcomes under `rules.outcome_as_of`, in SQL."""

        def at_now(field: str) -> Case:
            return Case(
                When(**{field: PENDING, "deadline_at__lt": now}, then=Value(FAILED)),
                default=F(field),
                output_field=models.CharField(),
            )

        return self.annotate(
            outcome_now=at_now("outcome"), computed_outcome_now=at_now("computed_outcome")
        )

    def with_outcome_as_of(self, outcome: str, now):
        """Only the incidents whose outcome at `now` is `outcome` (indexable conditions)."""
        if outcome == FAILED:
            return self.filter(Q(outcome=FAILED) | Q(outcome=PENDING, deadline_at__lt=now))
        if outcome == PENDING:
            return self.filter(outcome=PENDING).exclude(deadline_at__lt=now)
        return self.filter(outcome=outcome)


class Incident(models.Model):
    """All events of one cluster with one subject; its outcome is recomputed on every change."""

    OUTCOMES = [(o, o) for o in OUTCOMES]

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="incidents")
    subject = models.CharField(max_length=200)
    source = models.CharField(max_length=300, blank=True, help_text="job of its first detection")
    contract = models.ForeignKey(
        Contract, null=True, blank=True, on_delete=models.PROTECT, related_name="incidents"
    )
    year_number = models.PositiveSmallIntegerField(null=True, blank=True)
    detected_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    trigger = models.CharField(max_length=12, null=True, blank=True)
    category = models.CharField(max_length=20, null=True, blank=True)
    scope = models.CharField(max_length=14, null=True, blank=True)
    computed_outcome = models.CharField(max_length=14, null=True, blank=True, choices=OUTCOMES)
    outcome = models.CharField(
        max_length=14, null=True, blank=True, choices=OUTCOMES, help_text="after any override"
    )
    downtime_ms = models.BigIntegerField(null=True, blank=True)
    gpus = models.PositiveBigIntegerField(null=True, blank=True)
    override_outcome = models.CharField(max_length=14, null=True, blank=True, choices=OUTCOMES)
    override_reason = models.TextField(blank=True)
    override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    override_at = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    objects = IncidentQuerySet.as_manager()

    class Meta:
        db_table = "events_incident"  # made in the events app; moved here with its table
        constraints = [
            models.UniqueConstraint(fields=["cluster", "subject"], name="incident_per_subject")
        ]
        indexes = [
            # Covers the year counts and every dashboard chart: answered from the index alone.
            models.Index(
                fields=[
                    "contract",
                    "year_number",
                    "outcome",
                    "detected_at",
                    "category",
                    "trigger",
                    "gpus",
                    "downtime_ms",
                ],
                name="incident_year_covering",
            ),  # fmt: skip
            models.Index(fields=["outcome", "deadline_at"]),
            models.Index(fields=["cluster", "detected_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.subject}"


class Dispute(models.Model):
    """A customer's objection to an incident's outcome (SPEC 4.7), answered by the account team:
    upheld (an override with the answer as its reason) or rejected, with a reason."""

    OPEN, UPHELD, REJECTED = "open", "upheld", "rejected"
    STATES = [(s, s) for s in (OPEN, UPHELD, REJECTED)]

    incident = models.ForeignKey(Incident, on_delete=models.PROTECT, related_name="disputes")
    reason = models.TextField()
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    opened_by_label = models.CharField(max_length=150, help_text="user name, or the read token")
    opened_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=8, choices=STATES, default=OPEN)
    answer = models.TextField(blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["opened_at", "pk"]
        indexes = [models.Index(fields=["state", "opened_at"])]

    def __str__(self) -> str:
        return f"Dispute {self.pk} ({self.state}) on {self.incident}"
