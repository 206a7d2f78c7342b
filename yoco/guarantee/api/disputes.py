"""POST/GET /api/v1/incidents/{id}/disputes: a customer disputes its incident's outcome and
reads the answers (SPEC 4.7, 5)."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from yoco.accounts.auth import CustomerReadAccess
from yoco.guarantee.actions import ActionError, do_open_dispute
from yoco.guarantee.models import Dispute, Incident
from yoco.lib.openapi import error_responses


class DisputeSerializer(serializers.ModelSerializer):
    incident = serializers.IntegerField(source="incident_id")
    # A plain string: a second "state" enum would collide with the credit's in the schema.
    state = serializers.CharField(help_text="open, upheld or rejected")
    opened_by = serializers.CharField(source="opened_by_label")
    answer = serializers.CharField(help_text="the account team's reason; empty while open")

    class Meta:
        model = Dispute
        fields = ["id", "incident", "state", "reason", "opened_by", "opened_at", "answer",
                  "answered_at"]  # fmt: skip


class NewDisputeSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=5000, help_text="why the outcome is wrong")


class IncidentDisputesView(APIView):
    permission_classes = [CustomerReadAccess]

    def _incident(self, request, incident_id: int) -> Incident:
        return get_object_or_404(Incident, pk=incident_id, cluster__customer=request.customer)

    @extend_schema(
        responses={
            200: DisputeSerializer(many=True),
            **error_responses(401, 403, 404, e403="an ingest or billing key"),
        }
    )
    def get(self, request, incident_id: int):
        """The incident's disputes, oldest first, with their state and answer."""
        incident = self._incident(request, incident_id)
        return Response(DisputeSerializer(incident.disputes.order_by("pk"), many=True).data)

    @extend_schema(
        request=NewDisputeSerializer,
        responses={
            201: DisputeSerializer,
            **error_responses(
                400,
                401,
                403,
                404,
                409,
                e400="no reason, or a body that is not JSON",
                e403="an ingest or billing key, or a session without a valid CSRF token",
                e409="the incident counts toward no year, or has an open dispute already",
            ),  # fmt: skip
        },
    )
    def post(self, request, incident_id: int):
        """Dispute the incident's outcome, with a reason."""
        incident = self._incident(request, incident_id)
        body = NewDisputeSerializer(data=request.data)
        if not body.is_valid():
            problems = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in body.errors.items())
            return Response({"detail": problems}, status=status.HTTP_400_BAD_REQUEST)
        user = request.user if request.user and request.user.is_authenticated else None
        label = f"read token {request.auth.prefix}" if request.auth is not None else ""
        try:
            dispute = do_open_dispute(
                incident, reason=body.validated_data["reason"], user=user, label=label
            )
        except ActionError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(DisputeSerializer(dispute).data, status=status.HTTP_201_CREATED)
