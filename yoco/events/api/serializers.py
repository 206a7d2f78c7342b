from rest_framework import serializers

from yoco.events.models import Incident
from yoco.lib.vocabulary import OUTCOMES


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
