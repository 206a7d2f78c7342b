import json
import re

from django.conf import settings
from django.db.models import F
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated, ParseError, UnsupportedMediaType
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.events.api.serializers import IncidentSerializer
from yoco.events.fold import expire_pending
from yoco.events.ingest import ACCEPTED, CONFLICT, DUPLICATE, REJECTED, ingest_events
from yoco.events.models import Event, Incident
from yoco.events.schema import DATA_FIELDS
from yoco.lib.api import CustomerReadAccess, OrderedPageNumberPagination, TooLarge
from yoco.lib.auth import IngestKeyAuthentication
from yoco.lib.openapi import URL_TOO_LONG, error_responses

BATCH_TYPE = "application/cloudevents-batch+json"
SINGLE_TYPE = "application/cloudevents+json"


class CloudEventSerializer(serializers.Serializer):
    """One event's envelope as SPEC 3 states it (documentation: ingest judges the body itself,
    event by event, and answers `rejected` with the reason instead of refusing the request)."""

    specversion = serializers.ChoiceField(choices=["1.0"])
    id = serializers.CharField(min_length=1, max_length=200, help_text="unique per source")
    source = serializers.CharField(max_length=300, help_text="/clusters/{cluster}/jobs/{job}")
    type = serializers.ChoiceField(choices=sorted(DATA_FIELDS))
    time = serializers.DateTimeField(help_text="RFC 3339 with an offset")
    subject = serializers.CharField(
        required=False, min_length=1, max_length=200, help_text="the incident id"
    )
    data = serializers.DictField(required=False, help_text="the fields of its type (SPEC 3)")


class IngestResultSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="the event's position in the request")
    id = serializers.CharField(allow_null=True, help_text="the event's id, when it had one")
    status = serializers.ChoiceField(choices=[ACCEPTED, DUPLICATE, CONFLICT, REJECTED])
    error = serializers.CharField(required=False, help_text="why it was not stored")


class IngestAnswerSerializer(serializers.Serializer):
    results = IngestResultSerializer(many=True)
    accepted = serializers.IntegerField()
    duplicate = serializers.IntegerField()
    conflict = serializers.IntegerField()
    rejected = serializers.IntegerField()


class EventIngestView(APIView):
    """POST /api/v1/events: store CloudEvents from one cluster (SPEC section 3)."""

    authentication_classes = [IngestKeyAuthentication]
    parser_classes = []  # the body is read and judged here, to answer exactly per SPEC

    @extend_schema(
        operation_id="events_create",
        request={
            BATCH_TYPE: CloudEventSerializer(many=True),
            SINGLE_TYPE: CloudEventSerializer,
        },
        responses={
            200: OpenApiResponse(IngestAnswerSerializer, description="every event stored"),
            207: OpenApiResponse(
                IngestAnswerSerializer,
                description="some events rejected or in conflict; the others are stored",
            ),
            **error_responses(
                400,
                401,
                403,
                411,
                413,
                415,
                e400="not JSON, nested too deeply, an empty batch, a batch that is not an "
                "array or a single event that is not an object",
                e403="a read or billing key",
            ),  # fmt: skip
        },
        description=(
            "A batch (`application/cloudevents-batch+json`, a JSON array) or one event "
            "(`application/cloudevents+json`). Every event gets a result by index: accepted, "
            "duplicate, conflict or rejected with its reason. 200 when all are accepted or "
            "duplicate, 207 otherwise. Limits: YOCO_INGEST_MAX_BYTES bytes and "
            "YOCO_INGEST_MAX_EVENTS events per request (413 past them)."
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
        length = request.META.get("CONTENT_LENGTH")
        limit = settings.YOCO_INGEST_MAX_BYTES
        if length and length.isdigit() and int(length) > limit:
            raise TooLarge(f"the body is {length} bytes; the limit is {limit}")
        body = request._request.read(limit + 1)
        if len(body) > limit:
            raise TooLarge(f"the body is over the limit of {limit} bytes")
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ParseError(f"the body is not JSON: {exc}") from None
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


# The widest integer a filter may carry: the database's 64-bit ids.
MAX_FILTER_INT = 2**63 - 1


def _int_param(params, name: str) -> int:
    raw = params[name]
    if not re.fullmatch(r"-?[0-9]{1,19}", raw) or abs(int(raw)) > MAX_FILTER_INT:
        raise ParseError(f"{name} must be a whole number, got {raw!r}")
    return int(raw)
