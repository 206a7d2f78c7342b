from rest_framework import serializers

from yoco.events.models import Incident


class IncidentSerializer(serializers.ModelSerializer):
    """An incident as SPEC 5 lists it; `events` are the stored CloudEvents, oldest first."""

    contract = serializers.IntegerField(source="contract_id", allow_null=True)
    cluster = serializers.CharField(source="cluster.name")
    events = serializers.SerializerMethodField()

    class Meta:
        model = Incident
        fields = [
            "id", "contract", "cluster", "subject", "detected_at", "trigger", "category",
            "outcome", "events",
        ]  # fmt: skip

    def get_events(self, incident) -> list[dict]:
        return self.context["events"].get((incident.cluster_id, incident.subject), [])
