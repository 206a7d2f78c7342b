"""What clusters told us: raw events as received, and the jobs and incidents folded from them."""

from django.conf import settings
from django.db import models

from yoco.accounts.models import Cluster
from yoco.guarantee import rules
from yoco.guarantee.models import Contract

PENDING = models.Q(processed_at__isnull=True, quarantined_at__isnull=True)


class EventQuerySet(models.QuerySet):
    def pending(self):
        """Stored, not yet processed, not quarantined."""
        return self.filter(PENDING)

    def foldable(self):
        """What folds read: every event but the quarantined ones."""
        return self.filter(quarantined_at__isnull=True)


class Event(models.Model):
    """One CloudEvent as received. Ingest writes these rows with one multi-row INSERT, so the
    table keeps few indexes: each one costs every insert."""

    # db_index off: the (cluster, subject) index below serves lookups by cluster.
    cluster = models.ForeignKey(
        Cluster, on_delete=models.PROTECT, related_name="events", db_index=False
    )
    source = models.CharField(max_length=300)
    event_id = models.CharField(max_length=200)
    type = models.CharField(max_length=60)
    time = models.DateTimeField()
    subject = models.CharField(max_length=200, null=True, blank=True)
    raw = models.JSONField(help_text="the event exactly as received")
    content_hash = models.CharField(max_length=64)
    received_at = models.DateTimeField()
    # Processing (yoco/events/processing.py): stored events with neither mark are pending, and
    # are found by the sweep however the request that stored them ended.
    processed_at = models.DateTimeField(
        null=True, blank=True, help_text="when it was folded into its job, incident and year"
    )
    quarantined_at = models.DateTimeField(
        null=True, blank=True, help_text="set when it could not be processed; left out of folds"
    )
    # db_default: ingest inserts rows with its own INSERT statement, naming only its columns.
    quarantine_reason = models.TextField(blank=True, default="", db_default="")

    objects = EventQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "event_id"], name="event_unique_per_source")
        ]
        indexes = [
            models.Index(fields=["cluster", "subject"]),
            models.Index(fields=["source", "type"]),
            # Only the pending rows: small, and what the sweep reads.
            models.Index(fields=["id"], name="event_pending", condition=PENDING),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.source} {self.event_id}"

    @property
    def data(self) -> dict:
        return self.raw["data"]

    def as_fact(self) -> rules.EventFact:
        """What the guarantee's rules know of this event."""
        return rules.EventFact(self.event_id, self.source, self.type, self.time, self.data)


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

    def __str__(self) -> str:
        return self.source


class Incident(models.Model):
    """All events of one cluster with one subject; its outcome is recomputed on every change."""

    OUTCOMES = [
        (o, o) for o in ("live_resolved", "rolled_back", "failed", "pending", "excluded", "planned")
    ]

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

    class Meta:
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
