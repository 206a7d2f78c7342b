from decimal import Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from yoco.guarantee import rules
from yoco.guarantee.models import ContractYear, Credit


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
