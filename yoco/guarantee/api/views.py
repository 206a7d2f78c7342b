from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.events.fold import expire_pending
from yoco.guarantee.api.serializers import ContractYearSerializer
from yoco.guarantee.models import Contract
from yoco.lib.api import CustomerReadAccess
from yoco.lib.openapi import error_responses


class ContractYearsView(APIView):
    """GET /api/v1/contracts/{id}/years: every year of a contract with its stored result."""

    permission_classes = [CustomerReadAccess]

    @extend_schema(
        responses={
            200: inline_serializer(
                "ContractYears",
                {
                    "contract": serializers.IntegerField(),
                    "years": ContractYearSerializer(many=True),
                },
            ),
            **error_responses(401, 403, 404, e403="an ingest or billing key"),
        }
    )
    def get(self, request, contract_id: int):
        contract = get_object_or_404(Contract, pk=contract_id, customer=request.customer)
        expire_pending()
        years = contract.contract_years.select_related("contract").prefetch_related("credits")
        return Response(
            {"contract": contract.pk, "years": ContractYearSerializer(years, many=True).data}
        )
