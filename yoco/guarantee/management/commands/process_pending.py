"""`manage.py process_pending`: process every stored event still pending (after a crash, with
no broker, or to drain a backlog), and list the quarantined ones."""

from django.core.management.base import BaseCommand

from yoco.events.models import Event
from yoco.guarantee.processing import process_pending


class Command(BaseCommand):
    help = "Process every stored event not yet processed; report the quarantined ones."

    def handle(self, *args, **options):
        seen = process_pending()
        quarantined = Event.objects.filter(quarantined_at__isnull=False)
        self.stdout.write(
            f"processed {seen} pending events; {Event.objects.pending().count()} still pending; "
            f"{quarantined.count()} quarantined"
        )
        for event_id, source, reason in quarantined.values_list(
            "event_id", "source", "quarantine_reason"
        )[:20]:
            self.stdout.write(f"  quarantined {source} {event_id}: {reason}")
