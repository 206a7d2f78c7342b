from django.conf import settings
from django.db.models import F
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated, ParseError, UnsupportedMediaType
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.events import json_body
from yoco.events.api.serializers import IncidentSerializer
from yoco.events.fold import expire_pending
from yoco.events.ingest import ingest_events
from yoco.events.models import Event, Incident
from yoco.lib.api import (
    CustomerReadAccess,
    LengthRequired,
    OrderedPageNumberPagination,
    TooLarge,
)
from yoco.lib.auth import IngestKeyAuthentication

BATCH_TYPE = "application/cloudevents-batch+json"
SINGLE_TYPE = "application/cloudevents+json"

ingest_answer = inline_serializer(
    "IngestAnswer",
    {
        "results": serializers.ListField(child=serializers.DictField()),
        "accepted": serializers.IntegerField(),
        "duplicate": serializers.IntegerField(),
        "conflict": serializers.IntegerField(),
        "rejected": serializers.IntegerField(),
    },
)


class EventIngestView(APIView):
    """POST /api/v1/events: store CloudEvents from one cluster (SPEC section 3)."""

    authentication_classes = [IngestKeyAuthentication]
    parser_classes = []  # the body is read and judged here, to answer exactly per SPEC

    @extend_schema(
        request={BATCH_TYPE: OpenApiTypes.OBJECT, SINGLE_TYPE: OpenApiTypes.OBJECT},
        responses={200: ingest_answer, 207: ingest_answer},
        description=(
            "A batch (`application/cloudevents-batch+json`, a JSON array) or one event "
            "(`application/cloudevents+json`). Every event gets a result by index: accepted, "
            "duplicate, conflict or rejected with its reason. 200 when all are accepted or "
            "duplicate, 207 otherwise. Limits: YOCO_INGEST_MAX_BYTES bytes and "
            "YOCO_INGEST_MAX_EVENTS events per request (413 past them); JSON nested at most 32 "
            "levels (400 past it); a Content-Length is required (411 without one)."
        ),
    )
    def post(self, request):
        if request.auth is None:
            raise NotAuthenticated("send 'Authorization: Bearer <cluster key>'")
        content_type = request.content_type.split(";")[0].strip().lower()
        if content_type not in (BATCH_TYPE, SINGLE_TYPE):
            raise UnsupportedMediaType(
                content_type or "(none)",
                detail=f"Content-Type must be {BATCH_TYPE} or {SINGLE_TYPE}, "
                f"got {content_type or 'none'!r}",
            )
        # A body sent without a length (e.g. Transfer-Encoding: chunked) would read as empty.
        length = request.META.get("CONTENT_LENGTH") or ""
        if not length:
            raise LengthRequired("send the body with a Content-Length header")
        if not length.isdigit():
            raise ParseError(f"Content-Length {length!r} is not a number")
        limit = settings.YOCO_INGEST_MAX_BYTES
        if int(length) > limit:
            raise TooLarge(f"the body is {length} bytes; the limit is {limit}")
        body = request._request.read(limit + 1)
        if len(body) > limit:
            raise TooLarge(f"the body is over the limit of {limit} bytes")
        try:
            payload = json_body.load(body)
        except json_body.UnreadableBody as exc:
            raise ParseError(str(exc)) from None
        if content_type == BATCH_TYPE:
            if not isinstance(payload, list):
                raise ParseError(f"a {BATCH_TYPE} body must be a JSON array of events")
            if not payload:
                raise ParseError("the batch is empty")
            events = payload
        else:
            if not isinstance(payload, dict):
                raise ParseError(f"a {SINGLE_TYPE} body must be one JSON object")
            events = [payload]
        if len(events) > settings.YOCO_INGEST_MAX_EVENTS:
            raise TooLarge(
                f"{len(events)} events in one request; the limit is "
                f"{settings.YOCO_INGEST_MAX_EVENTS}"
            )
        result = ingest_events(request.auth.cluster, events)
        code = status.HTTP_200_OK if result.all_stored else status.HTTP_207_MULTI_STATUS
        return Response(result.summary(), status=code)


@extend_schema(
    parameters=[
        OpenApiParameter("contract", int, description="only this contract's incidents"),
        OpenApiParameter("year", int, description="only incidents counted in this contract year"),
        OpenApiParameter("outcome", str, enum=[c for c, _ in Incident.OUTCOMES]),
    ]
)
class IncidentListView(ListAPIView):
    """GET /api/v1/incidents: the token's (or portal user's) customer's incidents."""

    permission_classes = [CustomerReadAccess]
    serializer_class = IncidentSerializer
    pagination_class = OrderedPageNumberPagination

    def get_queryset(self):
        expire_pending()
        customer = self.request.customer
        queryset = Incident.objects.filter(cluster__customer=customer).select_related("cluster")
        params = self.request.query_params
        if params.get("contract"):
            queryset = queryset.filter(contract_id=_int_param(params, "contract"))
        if params.get("year"):
            queryset = queryset.filter(year_number=_int_param(params, "year"))
        if params.get("outcome"):
            outcome = params["outcome"]
            if outcome not in dict(Incident.OUTCOMES):
                raise ParseError(f"unknown outcome {outcome!r}")
            queryset = queryset.filter(outcome=outcome)
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


def _int_param(params, name: str) -> int:
    try:
        value = int(params[name])
    except ValueError:
        raise ParseError(f"{name} must be an integer, got {params[name]!r}") from None
    return value
