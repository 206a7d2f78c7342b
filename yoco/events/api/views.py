from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated, ParseError, UnsupportedMediaType
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.accounts.auth import IngestKeyAuthentication
from yoco.events import json_body
from yoco.events.ingest import ACCEPTED, CONFLICT, DUPLICATE, REJECTED, ingest_events
from yoco.events.schema import DATA_FIELDS
from yoco.lib.api import LengthRequired, TooLarge
from yoco.lib.openapi import error_responses

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
