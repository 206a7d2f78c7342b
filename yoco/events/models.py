"""What clusters told us: raw events as received. What they mean (jobs, incidents, years) is
`yoco.guarantee`'s business, one layer up."""

from django.db import models

from yoco.accounts.models import Cluster

UNPROCESSED = models.Q(processed_at__isnull=True, quarantined_at__isnull=True)


class EventQuerySet(models.QuerySet):
    def pending(self):
        """Stored, not yet processed, not quarantined."""
        return self.filter(UNPROCESSED)

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
    # Processing (yoco/guarantee/processing.py): stored events with neither mark are pending, and
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
            models.Index(fields=["id"], name="event_pending", condition=UNPROCESSED),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.source} {self.event_id}"

    @property
    def data(self) -> dict:
        return self.raw["data"]
