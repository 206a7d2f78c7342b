from decimal import Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from yoco.guarantee import rules
from yoco.guarantee.models import ContractYear, Credit, Incident
from yoco.lib.vocabulary import OUTCOMES


def credit_summary(credit: Credit | None) -> dict | None:
    if credit is None:
        return None
    return {
        "state": credit.state,
        "amount": rules.format_amount(Decimal(credit.amount), credit.currency),
        "currency": credit.currency,
    }


def shown_credit(year: ContractYear) -> Credit | None:
    """The year's live credit, else its most recent voided one."""
    credits = sorted(year.credits.all(), key=lambda c: (c.state != Credit.VOIDED, c.pk))
    return credits[-1] if credits else None


class ContractYearSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    state = serializers.CharField()

    def to_representation(self, year):
        data = super().to_representation(year)
        result = self.context["results"][year.pk]
        compliance = result["compliance"]
        data.update(
            counts=result["counts"],
            eligible=result["eligible"],
            compliance=None if compliance is None else str(compliance),
            meets=result["meets"],
            credit=credit_summary(shown_credit(year)),
        )
        return data

    @extend_schema_field(serializers.DictField())
    def get_counts(self, year):  # documents the shape for drf-spectacular
        return self.context["results"][year.pk]["counts"]


class IncidentSerializer(serializers.ModelSerializer):
    """An incident as SPEC 5 lists it; `events` are the stored CloudEvents, oldest first.
    Serialises a queryset annotated by `Incident.objects.as_of(now)`."""

    contract = serializers.IntegerField(source="contract_id", allow_null=True)
    cluster = serializers.CharField(source="cluster.name")
    outcome = serializers.ChoiceField(
        choices=OUTCOMES,
        source="outcome_now",
        allow_null=True,
        help_text="as of now: a pending incident whose deadline has passed is failed",
    )
    events = serializers.SerializerMethodField()

    class Meta:
        model = Incident
        fields = [
            "id", "contract", "cluster", "subject", "detected_at", "trigger", "category",
            "outcome", "events",
        ]  # fmt: skip

    def get_events(self, incident) -> list[dict]:
        return self.context["events"].get((incident.cluster_id, incident.subject), [])
