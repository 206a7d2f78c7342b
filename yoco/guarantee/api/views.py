from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.accounts.auth import CustomerReadAccess
from yoco.guarantee.api.serializers import ContractYearSerializer
from yoco.guarantee.models import Contract
from yoco.guarantee.years import year_results


class ContractYearsView(APIView):
    """GET /api/v1/contracts/{id}/years: every year of a contract with its result as of now."""

    permission_classes = [CustomerReadAccess]

    @extend_schema(
        responses=inline_serializer(
            "ContractYears",
            {"contract": serializers.IntegerField(), "years": ContractYearSerializer(many=True)},
        )
    )
    def get(self, request, contract_id: int):
        contract = get_object_or_404(Contract, pk=contract_id, customer=request.customer)
        years = list(contract.contract_years.select_related("contract").prefetch_related("credits"))
        results = dict(zip((y.pk for y in years), year_results(years), strict=True))
        serializer = ContractYearSerializer(years, many=True, context={"results": results})
        return Response({"contract": contract.pk, "years": serializer.data})
