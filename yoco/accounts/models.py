"""Who is who: customers, their portal users, their clusters and every API credential.

All credentials are stored hashed (djangorestframework-api-key, SHA-512 of a high-entropy key)
and shown once, when they are made. A credential is scoped by its table: a cluster key may only
write events, a read token only read its customer's data, a billing token only use the export.
Every state change of the platform leaves an AuditRecord.
"""

from django.conf import settings
from django.db import models
from rest_framework_api_key.models import AbstractAPIKey, APIKeyManager


class Customer(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A portal user belongs to exactly one customer."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="members")

    def __str__(self) -> str:
        return f"{self.user} @ {self.customer}"


class Cluster(models.Model):
    """A named cluster; its name appears in event sources (/clusters/{name}/jobs/{job})."""

    name = models.CharField(max_length=100, unique=True)
    customer = models.ForeignKey(Customer, on_delete=models.PROTECT, related_name="clusters")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class ClusterKeyManager(APIKeyManager):
    def get_usable_keys(self):
        # Ingest reads the key's cluster on every request: fetch it with the key.
        return super().get_usable_keys().select_related("cluster")


class ClusterKey(AbstractAPIKey):
    """Ingest credential of one cluster."""

    objects = ClusterKeyManager()
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="keys")

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "cluster ingest key"


class ReadToken(AbstractAPIKey):
    """Read credential of one customer: covers all its contracts."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="read_tokens")

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "customer read token"


class BillingToken(AbstractAPIKey):
    """Credential of the billing system: the credit export and its acknowledgements."""

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "billing token"


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
        db_table = "guarantee_auditrecord"  # made in the guarantee app; moved with its table
        ordering = ["-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_label} {self.action} {self.object_type}"
