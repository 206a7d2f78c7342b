import re

from django.db.models import F
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.accounts.auth import CustomerReadAccess
from yoco.events.models import Event
from yoco.guarantee.api.serializers import ContractYearSerializer, IncidentSerializer
from yoco.guarantee.models import Contract, Incident
from yoco.guarantee.years import year_results
from yoco.lib.api import OrderedPageNumberPagination
from yoco.lib.openapi import URL_TOO_LONG, error_responses
from yoco.lib.vocabulary import OUTCOMES


class ContractYearsView(APIView):
    """GET /api/v1/contracts/{id}/years: every year of a contract with its result as of now."""

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
        years = list(contract.contract_years.select_related("contract").prefetch_related("credits"))
        results = dict(zip((y.pk for y in years), year_results(years), strict=True))
        serializer = ContractYearSerializer(years, many=True, context={"results": results})
        return Response({"contract": contract.pk, "years": serializer.data})


@extend_schema(
    parameters=[
        OpenApiParameter("contract", int, description="only this contract's incidents"),
        OpenApiParameter("year", int, description="only incidents counted in this contract year"),
        OpenApiParameter("outcome", str, enum=list(OUTCOMES), description="outcome as of now"),
    ],
    responses={
        200: IncidentSerializer(many=True),
        **error_responses(
            400,
            401,
            403,
            404,
            e400="a contract, year or outcome filter that is not one",
            e403="an ingest or billing key, or a signed-in user of no customer",
            e404="a page past the last",
        ),  # fmt: skip
        **URL_TOO_LONG,
    },
)
class IncidentListView(ListAPIView):
    """GET /api/v1/incidents: the token's (or portal user's) customer's incidents."""

    permission_classes = [CustomerReadAccess]
    serializer_class = IncidentSerializer
    pagination_class = OrderedPageNumberPagination

    def get_queryset(self):
        now = timezone.now()
        customer = self.request.customer
        queryset = (
            Incident.objects.filter(cluster__customer=customer).select_related("cluster").as_of(now)
        )
        params = self.request.query_params
        if params.get("contract"):
            queryset = queryset.filter(contract_id=_int_param(params, "contract"))
        if params.get("year"):
            queryset = queryset.filter(year_number=_int_param(params, "year"))
        if params.get("outcome"):
            outcome = params["outcome"]
            if outcome not in OUTCOMES:
                raise ParseError(f"unknown outcome {outcome!r}")
            queryset = queryset.with_outcome_as_of(outcome, now)
        return queryset.order_by(F("detected_at").asc(nulls_first=True), "pk")

    def get_serializer(self, *args, **kwargs):
        incidents = args[0] if args else []
        kwargs["context"] = {**self.get_serializer_context(), "events": events_of(incidents)}
        return IncidentSerializer(*args, **kwargs)


def events_of(incidents) -> dict[tuple[int, str], list[dict]]:
    """The stored events of each incident, oldest first, in one query."""
    incidents = list(incidents)
    grouped: dict[tuple[int, str], list[dict]] = {}
    if not incidents:
        return grouped
    rows = (
        Event.objects.filter(
            cluster_id__in={i.cluster_id for i in incidents},
            subject__in={i.subject for i in incidents},
        )
        .order_by("time", "event_id")
        .values_list("cluster_id", "subject", "raw")
    )
    for cluster_id, subject, raw in rows:
        grouped.setdefault((cluster_id, subject), []).append(raw)
    return grouped


# The widest integer a filter may carry: the database's 64-bit ids.
MAX_FILTER_INT = 2**63 - 1


def _int_param(params, name: str) -> int:
    raw = params[name]
    if not re.fullmatch(r"-?[0-9]{1,19}", raw) or abs(int(raw)) > MAX_FILTER_INT:
        raise ParseError(f"{name} must be a whole number, got {raw!r}")
    return int(raw)
