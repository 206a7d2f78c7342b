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


class YearCountsSerializer(serializers.Serializer):
    """Incidents counted in a year, by outcome (documents the `counts` object)."""

    live_resolved = serializers.IntegerField()
    rolled_back = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    excluded = serializers.IntegerField()
    planned = serializers.IntegerField()


class CreditSummarySerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=[s for s, _ in Credit.STATES])
    amount = serializers.CharField(help_text="decimal string, the currency's minor-unit decimals")
    currency = serializers.CharField(help_text="ISO 4217 code")


class ContractYearSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    state = serializers.CharField()
    counts = serializers.SerializerMethodField()
    eligible = serializers.SerializerMethodField()
    compliance = serializers.SerializerMethodField()
    meets = serializers.SerializerMethodField()
    credit = serializers.SerializerMethodField()

    def _result(self, year) -> dict:
        # The views compute every year's result as of now in one query (`year_results`).
        return self.context["results"][year.pk]

    @extend_schema_field(YearCountsSerializer)
    def get_counts(self, year) -> dict:
        return self._result(year)["counts"]

    def get_eligible(self, year) -> int:
        return self._result(year)["eligible"]

    @extend_schema_field(
        serializers.CharField(
            allow_null=True, help_text="live / eligible, half-up to 4 places; null when none"
        )
    )
    def get_compliance(self, year) -> str | None:
        compliance = self._result(year)["compliance"]
        return None if compliance is None else str(compliance)

    def get_meets(self, year) -> bool:
        return self._result(year)["meets"]

    @extend_schema_field(CreditSummarySerializer(allow_null=True))
    def get_credit(self, year) -> dict | None:
        return credit_summary(shown_credit(year))


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
